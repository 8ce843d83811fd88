package datastoreio

import (
	"fmt"
	"io"
	"reflect"
	"strings"

	"cloud.google.com/go/datastore"
	pb "cloud.google.com/go/datastore/apiv1/datastorepb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"google.golang.org/protobuf/proto"

	"github.com/sdfio/sdfio/internal/beamtypes"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*datastore.Key)(nil)))
	beam.RegisterCoder(reflect.TypeOf((*datastore.Key)(nil)), encodeKeyCoder, decodeKeyCoder)
}

// encodeKeyCoder is the Beam coder of *datastore.Key: the key's protocol
// buffer (path and namespace), as Key.Encode writes it before base64.
func encodeKeyCoder(k *datastore.Key) ([]byte, error) {
	if k == nil {
		return nil, nil
	}
	return proto.Marshal(keyToProto(k))
}

func decodeKeyCoder(b []byte) (*datastore.Key, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var p pb.Key
	if err := proto.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("datastoreio: decoding a key: %w", err)
	}
	return protoToKey(&p)
}

// keyPath is k's path, root first.
func keyPath(k *datastore.Key) []*datastore.Key {
	n := 0
	for p := k; p != nil; p = p.Parent {
		n++
	}
	path := make([]*datastore.Key, n)
	for p := k; p != nil; p = p.Parent {
		n--
		path[n] = p
	}
	return path
}

// keyToProto converts a complete key to its protocol buffer, path root first.
func keyToProto(k *datastore.Key) *pb.Key {
	path := keyPath(k)
	out := &pb.Key{PartitionId: &pb.PartitionId{NamespaceId: k.Namespace}, Path: make([]*pb.Key_PathElement, len(path))}
	for i, e := range path {
		el := &pb.Key_PathElement{Kind: e.Kind}
		if e.ID != 0 {
			el.IdType = &pb.Key_PathElement_Id{Id: e.ID}
		} else if e.Name != "" {
			el.IdType = &pb.Key_PathElement_Name{Name: e.Name}
		}
		out.Path[i] = el
	}
	return out
}

// protoToKey converts a key's protocol buffer to a *datastore.Key.
func protoToKey(p *pb.Key) (*datastore.Key, error) {
	if len(p.GetPath()) == 0 {
		return nil, fmt.Errorf("datastoreio: key %v has an empty path", p)
	}
	ns := p.GetPartitionId().GetNamespaceId()
	var k *datastore.Key
	for _, e := range p.Path {
		k = &datastore.Key{Kind: e.Kind, ID: e.GetId(), Name: e.GetName(), Parent: k, Namespace: ns}
	}
	return k, nil
}

// encodeKey is the string form of a key inside the pipeline's serialised
// state (Key.Encode: URL-safe base64 of the protocol buffer); "" for nil.
func encodeKey(k *datastore.Key) string {
	if k == nil {
		return ""
	}
	return k.Encode()
}

// decodeKey is the inverse of encodeKey.
func decodeKey(s string) (*datastore.Key, error) {
	if s == "" {
		return nil, nil
	}
	k, err := datastore.DecodeKey(s)
	if err != nil {
		return nil, fmt.Errorf("datastoreio: decoding key %q: %w", s, err)
	}
	return k, nil
}

// keyString shows a key in errors: its path, root first, as Kind:id or
// Kind:"name" joined by /; "-inf"/"+inf" stand for a missing bound.
func keyString(k *datastore.Key, missing string) string {
	if k == nil {
		return missing
	}
	var b strings.Builder
	for i, e := range keyPath(k) {
		if i > 0 {
			b.WriteByte('/')
		}
		if e.ID != 0 {
			fmt.Fprintf(&b, "%s:%d", e.Kind, e.ID)
		} else {
			fmt.Fprintf(&b, "%s:%q", e.Kind, e.Name)
		}
	}
	return b.String()
}

// keyType is *datastore.Key, which Beam's schema inference cannot follow
// (Parent makes it recursive): as a field of an element type
// (`datastore:"__key__"`) it is encoded as its shadow keyField (package
// internal/beamtypes), stored as its encoded protocol buffer, so that
// structs with a key field get a coder.
var keyType = reflect.TypeOf((*datastore.Key)(nil))

type keyField *datastore.Key

func init() {
	beamtypes.Replace(keyType, encodeKeyField, decodeKeyField)
}

func encodeKeyField(k keyField, w io.Writer) error {
	if err := coder.WriteSimpleRowHeader(1, w); err != nil {
		return fmt.Errorf("datastoreio: encoding a key: %w", err)
	}
	b, err := encodeKeyCoder(k)
	if err != nil {
		return err
	}
	return coder.EncodeBytes(b, w)
}

func decodeKeyField(r io.Reader) (keyField, error) {
	if err := coder.ReadSimpleRowHeader(1, r); err != nil {
		return nil, fmt.Errorf("datastoreio: decoding a key: %w", err)
	}
	b, err := coder.DecodeBytes(r)
	if err != nil {
		return nil, fmt.Errorf("datastoreio: decoding a key: %w", err)
	}
	return decodeKeyCoder(b)
}
