package container

import (
	"errors"
	"reflect"
	"unsafe"

	"github.com/hamba/avro/v2"
	"github.com/modern-go/reflect2"

	"github.com/sdfio/sdfio/internal/box"
)

// NewReaderOf is NewReader for a record type known only at run time (a
// reflect.Type carried by a pipeline, say): records are decoded into fresh
// values of typ, and Next returns each as an any holding a typ value (not a
// pointer to one, unless typ is a pointer type). typ may be any type
// hamba/avro decodes the schema into, as for NewReader.
//
// Each record costs what NewReader[T]'s does plus nothing but wrapping the
// value in an interface: the value is decoded in place, in memory the
// interface then points to, without a copy.
func NewReaderOf(br *BlockReader, typ reflect.Type, opts Options) (*Reader[any], error) {
	return newReaderOf(br, typ, opts, true)
}

func newReaderOf(br *BlockReader, typ reflect.Type, opts Options, typed bool) (*Reader[any], error) {
	if typ == nil {
		return nil, errors.New("avro container " + br.Name() + ": NewReaderOf needs a record type")
	}
	r, err := newReader[any](br, typ, opts, typed)
	if err != nil {
		return nil, err
	}
	r.dyn = newDynamicType(typ)
	return r, nil
}

// OpenReaderOf is OpenReader for a record type known only at run time; see
// NewReaderOf.
func OpenReaderOf(name string, open Opener, start int64, typ reflect.Type, opts Options) (*Reader[any], error) {
	br, err := Open(name, open, start, opts.Limits)
	if err != nil {
		return nil, err
	}
	r, err := NewReaderOf(br, typ, opts)
	if err != nil {
		br.Close()
		return nil, err
	}
	return r, nil
}

// DecoderFunc makes the decoder of a reader's records from the file's
// writer schema and the reader schema (nil when there is none). The
// decoder's Decode gets a pointer to a zero value of the reader's record
// type and the datums of a block; it must stop at the first error the
// avro.Reader reports (or that it reports there itself with ReportError or
// by setting Error), and never loop or allocate by a count the data does
// not back.
type DecoderFunc func(writer, reader avro.Schema) (avro.ValDecoder, error)

// NewReaderWith is NewReaderOf with records decoded by the decoder that
// newDec makes instead of hamba/avro's: a generic decoder of its own, say.
// The schemas are still checked and resolved as for NewReaderOf, and blocks
// are validated as they would be for hamba/avro's decoder of typ.
func NewReaderWith(br *BlockReader, typ reflect.Type, newDec DecoderFunc, opts Options) (*Reader[any], error) {
	r, err := newReaderOf(br, typ, opts, false)
	if err != nil {
		return nil, err
	}
	dec, err := newDec(r.writer, opts.ReaderSchema)
	if err != nil {
		return nil, headerErr(br.Name(), br.Header().Size, ErrSchema, err, "record decoder")
	}
	r.dec = dec
	return r, nil
}

// OpenReaderWith is OpenReader with the decoder newDec makes; see
// NewReaderWith.
func OpenReaderWith(name string, open Opener, start int64, typ reflect.Type, newDec DecoderFunc, opts Options) (*Reader[any], error) {
	br, err := Open(name, open, start, opts.Limits)
	if err != nil {
		return nil, err
	}
	r, err := NewReaderWith(br, typ, newDec, opts)
	if err != nil {
		br.Close()
		return nil, err
	}
	return r, nil
}

// dynamicType allocates values of a run-time type and wraps them in
// interface values.
type dynamicType struct {
	typ   reflect.Type
	rtype reflect2.Type
	boxer box.Boxer
}

func newDynamicType(typ reflect.Type) *dynamicType {
	return &dynamicType{typ: typ, rtype: reflect2.Type2(typ), boxer: box.For(typ)}
}

// new allocates a zero value of the type and returns its address.
func (d *dynamicType) new() unsafe.Pointer { return d.rtype.UnsafeNew() }

// box returns the value at p as an interface (internal/box): for most
// types (structs of more than one word, strings, slices) the interface
// points at p itself, which nothing else references, so no copy is made;
// pointer-shaped types are loaded from p.
func (d *dynamicType) box(p unsafe.Pointer) any { return d.boxer.Box(p) }
