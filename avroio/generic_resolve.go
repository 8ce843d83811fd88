package avroio

import (
	"fmt"
	"unsafe"

	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
)

// newRecordDecoder is the container.DecoderFunc of Records: datums of the
// writer schema decoded into Records, resolved to the reader schema when
// there is one.
func newRecordDecoder(writer, reader avro.Schema) (avro.ValDecoder, error) {
	w, err := compileSchema(writer)
	if err != nil {
		return nil, fmt.Errorf("writer schema: %w", err)
	}
	if w.kind != kRecord && reader == nil {
		return nil, fmt.Errorf("generic Records need a record schema; the writer schema is %s", w.name)
	}
	if reader == nil {
		return recordDecoder{root: w, dec: new(datumDecoder)}, nil
	}
	rd, err := compileSchema(reader)
	if err != nil {
		return nil, fmt.Errorf("reader schema: %w", err)
	}
	if rd.kind != kRecord {
		return nil, fmt.Errorf("generic Records need a record schema; the reader schema is %s", rd.name)
	}
	res := resolver{done: map[[2]*node]*resolution{}}
	root, err := res.resolve(w, rd, "")
	if err != nil {
		return nil, err
	}
	return resolvingDecoder{root: root, dec: new(datumDecoder)}, nil
}

// resolution is how a datum of writer node w is read as a value of reader
// node rd, by Avro's schema resolution.
type resolution struct {
	w, rd *node
	how   how

	// record: for each writer field, the reader field it fills (nil: the
	// writer field is read and dropped), then the reader fields the writer
	// lacks, which take their defaults.
	fields   []*fieldResolution
	defaults []*field
	// array items, map values
	elem *resolution
	// writer union: per writer branch, how it resolves (nil: it cannot)
	branches []*resolution
	// reader union: the branch a writer value goes to and whether the
	// reader wraps it
	branch int
	wrap   bool
	inner  *resolution
	// enum: writer symbol index to reader symbol; ok false where the reader
	// has neither the symbol nor a default
	symbols []string
	symOK   []bool
}

type fieldResolution struct {
	name string // the reader field's name; "" to drop
	res  *resolution
}

type how uint8

const (
	hSame        how = iota // same encoding: decode by the reader node
	hPromote                // int/long/float to a wider number, string <-> bytes
	hRecord                 // records field by field
	hArray                  // items resolved
	hMap                    // values resolved
	hEnum                   // symbols mapped
	hWriterUnion            // read the branch, resolve it
	hReaderUnion            // a writer non-union into a reader union branch
)

type resolver struct{ done map[[2]*node]*resolution }

func (rs *resolver) resolve(w, rd *node, path string) (*resolution, error) {
	key := [2]*node{w, rd}
	if r, ok := rs.done[key]; ok {
		return r, nil
	}
	r := &resolution{w: w, rd: rd}
	rs.done[key] = r
	bad := func() (*resolution, error) {
		return nil, fmt.Errorf("field %s: reader schema %s cannot read writer schema %s", pathOr(path), rd.name, w.name)
	}
	switch {
	case w.kind == kUnion:
		r.how = hWriterUnion
		for _, wb := range w.branches {
			br, err := rs.resolve(wb, rd, path)
			if err != nil {
				br = nil // only a datum of this branch fails
			}
			r.branches = append(r.branches, br)
		}
		return r, nil
	case rd.kind == kUnion:
		r.how = hReaderUnion
		j := -1
		for pass := 0; pass < 2 && j < 0; pass++ {
			for i, b := range rd.branches {
				if pass == 0 && b.name == w.name || pass == 1 && compatible(w, b) {
					j = i
					break
				}
			}
		}
		if j < 0 {
			return bad()
		}
		inner, err := rs.resolve(w, rd.branches[j], path)
		if err != nil {
			return nil, err
		}
		r.branch, r.wrap, r.inner = j, rd.wrap[j], inner
		return r, nil
	case w.kind == kRecord && rd.kind == kRecord:
		r.how = hRecord
		filled := map[string]bool{}
		for _, wf := range w.fields {
			fr := &fieldResolution{}
			if rf := readerField(rd, wf.name); rf != nil {
				res, err := rs.resolve(wf.node, rf.node, join(path, rf.name))
				if err != nil {
					return nil, err
				}
				fr.name, fr.res = rf.name, res
				filled[rf.name] = true
			} else {
				res, err := rs.resolve(wf.node, wf.node, join(path, wf.name))
				if err != nil {
					return nil, err
				}
				fr.res = res
			}
			r.fields = append(r.fields, fr)
		}
		for _, rf := range rd.fields {
			if filled[rf.name] {
				continue
			}
			if !rf.hasDef {
				return nil, fmt.Errorf("field %s: the reader schema's field has no default and the writer schema lacks it", join(path, rf.name))
			}
			r.defaults = append(r.defaults, rf)
		}
		return r, nil
	case w.kind == kArray && rd.kind == kArray, w.kind == kMap && rd.kind == kMap:
		r.how = hArray
		if w.kind == kMap {
			r.how = hMap
		}
		elem, err := rs.resolve(w.elem, rd.elem, path+"[]")
		if err != nil {
			return nil, err
		}
		r.elem = elem
		return r, nil
	case w.kind == kEnum && rd.kind == kEnum:
		r.how = hEnum
		def := ""
		for _, s := range rd.symbols {
			if s == rd.enumDefault {
				def = s
			}
		}
		for _, s := range w.symbols {
			ok := false
			for _, t := range rd.symbols {
				if s == t {
					ok = true
				}
			}
			switch {
			case ok:
				r.symbols, r.symOK = append(r.symbols, s), append(r.symOK, true)
			case def != "":
				r.symbols, r.symOK = append(r.symbols, def), append(r.symOK, true)
			default:
				r.symbols, r.symOK = append(r.symbols, s), append(r.symOK, false)
			}
		}
		return r, nil
	case w.avroType == rd.avroType && w.kind != kRecord && w.kind != kArray && w.kind != kMap && w.kind != kEnum && w.size == rd.size:
		r.how = hSame
		return r, nil
	case promotes(w.avroType, rd.avroType):
		r.how = hPromote
		return r, nil
	}
	return bad()
}

func pathOr(p string) string {
	if p == "" {
		return "(the record)"
	}
	return p
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// readerField is the field of reader record rd that writer field name
// fills: by name, else by one of its aliases.
func readerField(rd *node, name string) *field {
	for _, f := range rd.fields {
		if f.name == name {
			return f
		}
	}
	for _, f := range rd.fields {
		for _, a := range f.aliases {
			if a == name {
				return f
			}
		}
	}
	return nil
}

// compatible reports whether a writer datum of w can be read as b (for
// choosing a reader union's branch, after an exact name match).
func compatible(w, b *node) bool {
	switch {
	case w.kind == kRecord || w.kind == kEnum || w.kind == kFixed:
		return b.kind == w.kind && (b.name == w.name || b.hasAlias(w.name))
	case w.kind == kArray || w.kind == kMap:
		return b.kind == w.kind
	}
	return w.avroType == b.avroType && w.size == b.size || promotes(w.avroType, b.avroType)
}

func promotes(w, r avro.Type) bool {
	switch w {
	case avro.Int:
		return r == avro.Long || r == avro.Float || r == avro.Double
	case avro.Long:
		return r == avro.Float || r == avro.Double
	case avro.Float:
		return r == avro.Double
	case avro.String:
		return r == avro.Bytes
	case avro.Bytes:
		return r == avro.String
	}
	return false
}

// resolvingDecoder decodes Records of a writer schema resolved to a
// reader schema.
type resolvingDecoder struct {
	root *resolution
	dec  *datumDecoder
}

func (d resolvingDecoder) Decode(ptr unsafe.Pointer, r *avro.Reader) {
	v := d.dec.resolved(r, d.root, 0)
	m, _ := v.(map[string]any)
	*(*Record)(ptr) = m
}

// resolved decodes one datum by res.
func (d *datumDecoder) resolved(r *avro.Reader, res *resolution, depth int) any {
	if depth > maxDatumDepth {
		fail(r, errDepth)
		return nil
	}
	switch res.how {
	case hSame:
		return d.decode(r, res.rd, depth)
	case hPromote:
		v := d.decode(r, res.w, depth)
		switch res.rd.avroType {
		case avro.Long:
			return d.int64v(int64(v.(int)))
		case avro.Float:
			if f, ok := promotedFloat[float32](v); ok {
				return d.float32v(f)
			}
		case avro.Double:
			if f, ok := promotedFloat[float64](v); ok {
				return d.float64v(f)
			}
		case avro.String:
			if b, ok := v.([]byte); ok {
				return d.stringv(string(b))
			}
		case avro.Bytes:
			if s, ok := v.(string); ok {
				return d.bytesv([]byte(s))
			}
		}
		return v
	case hRecord:
		m := make(map[string]any, len(res.rd.fields))
		for i, f := range res.fields {
			v := d.resolved(r, f.res, depth+1)
			if r.Error != nil {
				r.Error = container.InField(res.w.fields[i].name, r.Error)
				return m
			}
			if f.name != "" {
				m[f.name] = v
			}
		}
		for _, f := range res.defaults {
			m[f.name] = copyDefault(f.def)
		}
		return m
	case hArray:
		out, c := d.arrayBlock(r, nil)
		for ; c > 0; out, c = d.arrayBlock(r, out) {
			for i := int64(0); i < c && r.Error == nil; i++ {
				out = append(out, d.resolved(r, res.elem, depth+1))
			}
		}
		return d.arrayEnd(r, out)
	case hMap:
		out, c := mapBlock(r, nil)
		for ; c > 0; out, c = mapBlock(r, out) {
			for i := int64(0); i < c && r.Error == nil; i++ {
				k := r.ReadString()
				out[k] = d.resolved(r, res.elem, depth+1)
			}
		}
		return mapEnd(r, out)
	case hEnum:
		i := r.ReadInt()
		if r.Error != nil {
			return ""
		}
		if i < 0 || int(i) >= len(res.symbols) {
			fail(r, fmt.Errorf("enum %s: symbol index %d out of range [0, %d)", res.w.name, i, len(res.symbols)))
			return ""
		}
		if !res.symOK[i] {
			fail(r, fmt.Errorf("enum %s: the reader schema has no symbol %s and no default", res.rd.name, res.symbols[i]))
			return ""
		}
		return res.symbols[i]
	case hWriterUnion:
		i, ok := branchIndex(r, len(res.branches))
		if !ok {
			return nil
		}
		b := res.branches[i]
		if b == nil {
			fail(r, fmt.Errorf("the reader schema %s cannot read writer union branch %s", res.rd.name, res.w.branches[i].name))
			return nil
		}
		return d.resolved(r, b, depth+1)
	case hReaderUnion:
		v := d.resolved(r, res.inner, depth+1)
		if res.wrap {
			return map[string]any{res.rd.branches[res.branch].name: v}
		}
		return v
	}
	fail(r, fmt.Errorf("unknown resolution %d", res.how))
	return nil
}

// copyDefault copies the mutable parts of a default value, so that
// records never share them.
func copyDefault(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyDefault(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = copyDefault(e)
		}
		return out
	case []byte:
		return append([]byte(nil), x...)
	}
	return v
}

// promotedFloat is v, a writer's int, long or float, converted straight to
// the reader's float type F (not through float64, which would round twice).
func promotedFloat[F float32 | float64](v any) (F, bool) {
	if f, ok := v.(float32); ok {
		return F(f), true
	}
	i, ok := asInt64(v)
	return F(i), ok
}
