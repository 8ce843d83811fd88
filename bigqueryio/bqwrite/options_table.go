package bqwrite

import "fmt"

// The options of the table CreateIfNeeded makes (its spec: partitioning,
// clustering, description, labels, KMS key, primary key; TableSpec is in
// write_table.go) and of the write and the table's schema.

// WithTimePartitioning creates the table (CreateIfNeeded) partitioned by
// time: by Column's value, or by the time rows are written. The spec's
// checks, and writing into one partition ("p.d.t$20261203"):
// docs/BIGQUERY.md, "Table features".
func WithTimePartitioning(p TimePartitioning) WriteOption {
	return writeOnlyOption(func(c *writeConfig) {
		c.note("WithTimePartitioning", p)
		c.Spec.TimePartitioning = &p
	})
}

// WithRangePartitioning creates the table (CreateIfNeeded) partitioned by
// ranges of an INTEGER column.
func WithRangePartitioning(p RangePartitioning) WriteOption {
	return writeOnlyOption(func(c *writeConfig) {
		c.note("WithRangePartitioning", p)
		c.Spec.RangePartitioning = &p
	})
}

// WithClustering creates the table (CreateIfNeeded) clustered by columns,
// in this order: one to four top-level, non-repeated columns of type
// STRING, INTEGER, NUMERIC, BIGNUMERIC, BOOLEAN, DATE, DATETIME,
// TIMESTAMP or GEOGRAPHY.
func WithClustering(columns ...string) WriteOption {
	return writeOnlyOption(func(c *writeConfig) {
		c.note("WithClustering", stringArgs(columns)...)
		c.Spec.Clustering = append([]string(nil), columns...)
	})
}

// WithTableDescription creates the table (CreateIfNeeded) with a
// description.
func WithTableDescription(text string) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithTableDescription", text); c.Spec.Description = text })
}

// WithTableLabels creates the table (CreateIfNeeded) with labels: keys of
// 1 to 63 lowercase letters, digits, '_' and '-' starting with a letter,
// values of at most 63 of them, at most 64 labels.
func WithTableLabels(labels map[string]string) WriteOption {
	return writeOnlyOption(func(c *writeConfig) {
		c.note("WithTableLabels", fmt.Sprint(labels))
		c.Spec.Labels = make(map[string]string, len(labels))
		for k, v := range labels {
			c.Spec.Labels[k] = v
		}
	})
}

// WithKMSKey creates the table (CreateIfNeeded) encrypted with a Cloud KMS
// key, projects/p/locations/l/keyRings/r/cryptoKeys/k (Java's
// withKmsKey).
func WithKMSKey(key string) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithKMSKey", key); c.Spec.KMSKey = key })
}

// WithTableSpecFunc gives each table of a WithTableFunc write its own spec
// when CreateIfNeeded creates it: fn is a func(table string) TableSpec of
// the table spec (project.dataset.table, without a partition decorator), a
// top-level function registered with Beam (register.Function1x1). It
// cannot be given with the options that set a spec for every table
// (WithTimePartitioning, WithClustering, ...). A spec that does not fit the
// schema fails the write, naming the table, when the table is created.
func WithTableSpecFunc(fn any) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithTableSpecFunc", rawArg(funcName(fn))); c.specFn = fn })
}

// WithPrimaryKey creates the table (CreateIfNeeded) with a primary key of
// columns, in this order: 1 to 16 top-level columns of the schema, neither
// REPEATED nor RECORD. BigQuery does not enforce a primary key (NOT
// ENFORCED): it is what CDC changes (WithRowMutation) are applied by. As
// Beam Java, the table is made without max_staleness: set it on the table
// to trade freshness for the cost of applying changes at query time.
func WithPrimaryKey(columns ...string) WriteOption {
	return writeOnlyOption(func(c *writeConfig) {
		c.note("WithPrimaryKey", stringArgs(columns)...)
		c.Spec.PrimaryKey = append(make([]string, 0, len(columns)), columns...)
	})
}

// SchemaUpdateOption lets Write change the schema of a table that exists,
// before it appends rows that need the change (Java's
// withSchemaUpdateOptions).
type SchemaUpdateOption string

const (
	// AllowFieldAddition adds the columns of the write's schema (WithSchema,
	// or inferred from the struct type) that the table lacks, at its end,
	// NULLABLE (the service adds no REQUIRED column to a table that has
	// rows) or REPEATED, RECORD columns with their fields.
	AllowFieldAddition SchemaUpdateOption = "ALLOW_FIELD_ADDITION"
	// AllowFieldRelaxation makes the table's REQUIRED columns that are
	// NULLABLE in the write's schema NULLABLE.
	AllowFieldRelaxation SchemaUpdateOption = "ALLOW_FIELD_RELAXATION"
)

// WithSchemaUpdateOptions lets Write patch the schema of a table that
// exists (tables.patch) when it first meets it, so that the write's rows
// fit: AllowFieldAddition, AllowFieldRelaxation. Rows of bqwrite.Row
// need WithSchema for it. How the patch is made, and how a write follows
// a schema that grows while it runs: docs/BIGQUERY.md, "Schema changes".
func WithSchemaUpdateOptions(opts ...SchemaUpdateOption) WriteOption {
	return writeOnlyOption(func(c *writeConfig) {
		args := make([]any, len(opts))
		for i, o := range opts {
			args[i] = string(o)
		}
		c.note("WithSchemaUpdateOptions", args...)
		c.AllowAddition, c.AllowRelaxation, c.badUpdate = false, false, ""
		for _, o := range opts {
			switch o {
			case AllowFieldAddition:
				c.AllowAddition = true
			case AllowFieldRelaxation:
				c.AllowRelaxation = true
			default:
				c.badUpdate = string(o)
			}
		}
	})
}

// WithIgnoreUnknownValues writes the rows of bqwrite.Row whose keys the
// table lacks without those keys (Java's ignoreUnknownValues), instead of
// sending them to FailedRows (the default), at every level of RECORDs.
// It applies to Row input alone: a struct's fields are checked against
// the schema when the pipeline is built.
func WithIgnoreUnknownValues() WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithIgnoreUnknownValues"); c.IgnoreUnknown = true })
}
