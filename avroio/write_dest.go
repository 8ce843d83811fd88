package avroio

// Destinations (WithDestination): which destination an element goes to,
// and the names of its files.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
)

// destFunc is WithDestination's function, carried to the workers.
type destFunc struct {
	Fn beam.EncodedFunc

	call reflectx.Func1x1
}

// check refuses, at construction, a function of another element type
// than elem, or one that cannot travel to the workers.
func (d *destFunc) check(call string, t, elem reflect.Type) error {
	if t != elem {
		return fmt.Errorf("%s: the function takes %v, but the elements are %v", call, t, elem)
	}
	b, err := json.Marshal(d.Fn)
	if err == nil {
		var back beam.EncodedFunc
		err = json.Unmarshal(b, &back)
	}
	if err != nil {
		return fmt.Errorf("%s: the function cannot be sent to the workers (register it with register.Function1x1 in an init function): %v", call, err)
	}
	return nil
}

// of is the destination of elem, checked.
func (d *destFunc) of(elem any) (string, error) {
	if d.call == nil {
		d.call = reflectx.ToFunc1x1(d.Fn.Fn)
	}
	dest := d.call.Call1x1(elem).(string)
	if strings.Contains(dest, "://") {
		return "", fmt.Errorf("WithDestination: destination %q of a %T has a \"://\": it must be a path under the prefix", dest, elem)
	}
	// A ".." path element, found without splitting (this runs per record).
	if dest == ".." || strings.HasPrefix(dest, "../") || strings.HasSuffix(dest, "/..") || strings.Contains(dest, "/../") {
		return "", fmt.Errorf("WithDestination: destination %q of a %T has a \"..\" element: it must not leave the prefix", dest, elem)
	}
	return dest, nil
}

// destPrefix is the prefix of the files of destination dest.
func (c writeConfig) destPrefix(dest string) string { return c.Prefix + dest }

// destShardName is the final name of shard i of n of destination dest.
func (c writeConfig) destShardName(dest string, i, n int) string {
	return c.destPrefix(dest) + expandTemplate(c.Template, i, n) + c.Suffix
}
