package bqwrite

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// A write and the table's schema: WithIgnoreUnknownValues,
// WithSchemaUpdateOptions, and following a schema that grows while the
// write runs.

// ignoreUnknownKeys makes p and its RECORDs drop unknown keys.
func (p *recordPlan) ignoreUnknownKeys() {
	p.ignoreUnknown = true
	for i := range p.cols {
		if p.cols[i].sub != nil {
			p.cols[i].sub.ignoreUnknownKeys()
		}
	}
}

// checkSchemaUpdates checks WithSchemaUpdateOptions' options.
func (c *writeConfig) checkSchemaUpdates() error {
	calls := c.calls("WithSchemaUpdateOptions")
	switch {
	case len(calls) == 0:
		return nil
	case c.badUpdate != "":
		return fmt.Errorf("%s: %q is not a schema update option: want AllowFieldAddition or AllowFieldRelaxation", calls[len(calls)-1], c.badUpdate)
	case !c.AllowAddition && !c.AllowRelaxation:
		return fmt.Errorf("%s: no option given", calls[len(calls)-1])
	}
	return nil
}

// updatedSchema is the table's schema with the changes the options allow
// towards the write's schema, and whether there is any.
func (c *writeConfig) updatedSchema(table, given bigquery.Schema) (bigquery.Schema, bool) {
	out := make(bigquery.Schema, 0, len(table))
	changed := false
	for _, f := range table {
		nf := *f
		if g := topLevel(given, f.Name); g != nil {
			if c.AllowRelaxation && f.Required && !g.Required && !g.Repeated {
				nf.Required, changed = false, true
			}
			if f.Type == bigquery.RecordFieldType && g.Type == bigquery.RecordFieldType {
				var sub bool
				if nf.Schema, sub = c.updatedSchema(f.Schema, g.Schema); sub {
					changed = true
				}
			}
		}
		out = append(out, &nf)
	}
	if c.AllowAddition {
		for _, g := range given {
			if topLevel(table, g.Name) == nil {
				out = append(out, nullableField(g))
				changed = true
			}
		}
	}
	return out, changed
}

// nullableField is a copy of f that is not REQUIRED, nor are its fields.
func nullableField(f *bigquery.FieldSchema) *bigquery.FieldSchema {
	nf := *f
	nf.Required = false
	nf.Schema = nil
	for _, sub := range f.Schema {
		nf.Schema = append(nf.Schema, nullableField(sub))
	}
	return &nf
}

// updateSchema patches the schema of the table res (which exists) so that
// rows of the schema given fit, as WithSchemaUpdateOptions allows; a
// concurrent patch (another worker's) is read again and taken.
func (c writeConfig) updateSchema(ctx context.Context, res string, given bigquery.Schema) error {
	client, err := c.rest(ctx, projectOf(res))
	if err != nil {
		return err
	}
	defer client.Close()
	tbl := client.Table(res)
	for attempt := 0; ; attempt++ {
		md, err := tbl.Metadata(ctx)
		if err != nil {
			return fmt.Errorf("reading the table's schema (WithSchemaUpdateOptions): %w", err)
		}
		schema, changed := c.updatedSchema(md.Schema, given)
		if !changed {
			return nil
		}
		_, err = tbl.Update(ctx, bigquery.TableMetadataToUpdate{Schema: schema}, md.ETag)
		if err == nil {
			return nil
		}
		if !isHTTP(err, http.StatusPreconditionFailed) || attempt >= 5 {
			return fmt.Errorf("updating the table's schema (WithSchemaUpdateOptions) to %s: %w", columnNames(schema), err)
		}
	}
}

// schemaRecheck is how long a Row's key found not to be a column stays
// so before the table's schema is read again for it.
const schemaRecheck = 10 * time.Second

// followSchema reads the table's schema again when the Row x has a key
// that is not one of its columns, which another writer may have added
// since the write read it (a schema update), and takes the new schema;
// it reports whether the encoder changed. Each missing key is looked for
// at most once per schemaRecheck.
func (f *appendFn) followSchema(ctx context.Context, t *writeTable, x any) bool {
	row, ok := x.(Row)
	if !ok {
		return false
	}
	var unknown []string
	for k := range row {
		if !t.enc.plan.has(k) && time.Since(t.missing[k]) > schemaRecheck {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return false
	}
	ws, err := f.mw.GetWriteStream(ctx, &storagepb.GetWriteStreamRequest{Name: t.base + "/streams/_default", View: storagepb.WriteStreamView_FULL})
	var enc *rowEncoder
	if err == nil {
		var schema bigquery.Schema
		if schema, err = tableSchema(ws.GetTableSchema()); err == nil {
			enc, err = newRowEncoder(schema, f.Type.T)
		}
	}
	if err != nil {
		log.Warnf(ctx, "bqwrite.Write to %s: reading the table's schema again for the keys %v: %v", t.spec, unknown, err)
		return false
	}
	if t.missing == nil {
		t.missing = map[string]time.Time{}
	}
	found := false
	for _, k := range unknown {
		if enc.plan.has(k) {
			found = true
		} else {
			t.missing[k] = time.Now()
		}
	}
	if !found {
		return false
	}
	if !extends(t.enc.schema, enc.schema) {
		// A column removed or changed: rows encoded already, numbered by
		// column, would be read as other columns' values.
		log.Warnf(ctx, "bqwrite.Write to %s: the table's schema changed other than by added columns, not followed: %s", t.spec, columnNames(enc.schema))
		return false
	}
	if f.Cfg.IgnoreUnknown {
		enc.plan.ignoreUnknownKeys()
	}
	f.changeDesc(enc)
	log.Infof(ctx, "bqwrite.Write to %s: the table's schema changed, now %s", t.spec, columnNames(enc.schema))
	t.enc = enc
	return true
}

// extends reports whether schema is old with columns added at the end (and
// modes relaxed), so that rows encoded for old are rows of schema.
func extends(old, schema bigquery.Schema) bool {
	if len(schema) < len(old) {
		return false
	}
	for i, o := range old {
		n := schema[i]
		if o.Name != n.Name || o.Type != n.Type || o.Repeated != n.Repeated || (n.Type == bigquery.RecordFieldType && !extends(o.Schema, n.Schema)) {
			return false
		}
	}
	return true
}
