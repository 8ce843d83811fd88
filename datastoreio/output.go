package datastoreio

import (
	"errors"
	"fmt"
	"reflect"

	"cloud.google.com/go/datastore"
)

// The output types of a read, and how each result of the client's iterator
// becomes an element:
//
//   - *datastore.Key: the read is keys-only and emits the keys;
//   - *datastore.Entity: the entity's key and its properties as the client
//     loads them into a PropertyList (nested entities as *datastore.Entity,
//     arrays as []interface{});
//   - a struct, or a type whose pointer is a datastore.PropertyLoadSaver
//     (datastore.PropertyList among them): loaded as the client's Get loads
//     it.
var (
	plsType       = reflect.TypeFor[datastore.PropertyLoadSaver]()
	entityPtrType = reflect.TypeFor[*datastore.Entity]()
)

func checkType(t reflect.Type) error {
	switch {
	case t == nil:
		return errors.New("no output type")
	case t == keyType, t == entityPtrType:
		return nil
	case reflect.PointerTo(t).Implements(plsType), t.Kind() == reflect.Struct:
		return nil
	}
	return fmt.Errorf("output type %v is neither a struct, a PropertyLoadSaver, *datastore.Entity nor *datastore.Key", t)
}

// checkKeysOnly refuses a keys-only query read into anything but keys: its
// results carry no properties to load.
func checkKeysOnly(q Query, t reflect.Type) error {
	if q.Keys && t != keyType {
		return fmt.Errorf("%s is keys-only: read it into *datastore.Key (reflect.TypeFor[*datastore.Key]()), not %v", q.describe(), t)
	}
	if t == keyType && len(q.Projection) > 0 {
		return fmt.Errorf("a read into *datastore.Key is keys-only: %s cannot project properties too", q.describe())
	}
	return nil
}

// loader loads the iterator's next result as an element of its type.
type loader struct {
	t reflect.Type
}

// next returns the next result's key and element; iterator.Done at the end.
func (l loader) next(it *datastore.Iterator) (*datastore.Key, any, error) {
	switch l.t {
	case keyType:
		k, err := it.Next(nil)
		return k, k, err
	case entityPtrType:
		var props datastore.PropertyList
		k, err := it.Next(&props)
		if err != nil {
			return k, nil, err
		}
		return k, &datastore.Entity{Key: k, Properties: props}, nil
	}
	dst := reflect.New(l.t)
	k, err := it.Next(dst.Interface())
	if err != nil {
		return k, nil, err
	}
	if l.t.Kind() == reflect.Slice && l.t.Name() != "" {
		// Beam Go makes the element type of a PCollection of a named slice
		// type the unnamed slice ([]datastore.Property for
		// datastore.PropertyList): emit that, as the next DoFn takes it.
		return k, dst.Elem().Convert(reflect.SliceOf(l.t.Elem())).Interface(), nil
	}
	return k, dst.Elem().Interface(), nil
}
