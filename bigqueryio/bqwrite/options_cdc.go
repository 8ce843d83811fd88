package bqwrite

// The options of a CDC write (WithRowMutation; WithPrimaryKey, in
// options_table.go, gives the table it makes a primary key).

// WithRowMutation writes each element as a change (UPSERT or DELETE) to
// the row of the table with the same primary key, as fn says: fn is a
// func(T) bqwrite.RowMutation of the element type T, a top-level
// function registered with Beam (register.Function1x1). The changes go
// through the table's _default stream, so WithAtLeastOnce must be given
// (the service takes CDC rows nowhere else); a table CreateIfNeeded makes
// needs WithPrimaryKey. As Beam Java's withRowMutationInformationFn. A
// change fn gives a type or sequence number the service does not take is
// refused (FailedRows, or WithFailOnRowErrors fails the write). What the
// service does with the changes, and why CDC is correct at least once:
// docs/BIGQUERY.md, "Change data capture".
func WithRowMutation(fn any) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithRowMutation", rawArg(funcName(fn))); c.mutationFn = fn })
}

// WithUnorderedChanges lets a WithRowMutation write send changes without
// a sequence number (RowMutation.SequenceNumber ""), which it refuses
// otherwise: the service then applies the changes of a key in the order
// they arrive, and a retried append (WithAtLeastOnce appends again after
// a transient failure) or appends multiplexed on one connection can bring
// an older upsert after a newer one, which then wins. Give it only when
// the changes of a key cannot come close together, or when their order
// does not matter.
func WithUnorderedChanges() WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithUnorderedChanges"); c.Unordered = true })
}
