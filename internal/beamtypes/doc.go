// Package beamtypes gives the element types of sdfio's transforms their
// coders without changing how Beam encodes anything else in the program.
//
// Beam Go encodes a struct between stages with its schema coder, which
// loses or refuses some field types the IOs fill: math/big.Rat (unexported
// fields: every decimal would arrive as 0), civil.Date (a time.Month field
// the schema refuses), time.Time outside the years 0-9999 (its text form
// has none), *datastore.Key (recursive) and datastore's property lists.
// Registering coders or schema logical types for those types themselves
// would change every PCollection of the program that holds them, the
// user's own included, and Beam v2.78 panics when two packages register
// logical types for the same Go type.
//
// So nothing here is registered for a type sdfio does not own. Instead:
//
//   - each such field type has a shadow: a type sdfio owns, defined on the
//     field type's underlying type (same memory layout), whose schema
//     coder providers are registered for the shadow only (Replace, at
//     init; this package's own shadows are Rat, Date and Time);
//   - Use, called when an sdfio transform is constructed, gives that
//     transform's element type T (and only T), when T holds such a field
//     at any depth and has no coder of its own, a custom coder: Beam's
//     schema row coder of T's shadow (T with every such field type
//     replaced by its shadow), applied to T's memory viewed as the shadow.
//     Beam's row encoding of every other field is unchanged, and so is
//     every field type's provider that the program registered itself.
//
// A coder of T that the program registered itself (beam.RegisterCoder) is
// kept. T's coder is a custom coder, so its PCollections carry no schema.
//
// One exception in the module, outside this package: datastoreio registers
// program-wide Beam coders for *datastore.Key, datastore.Property,
// PropertyList, *PropertyList and *Entity. They must be global, since a
// program's own PCollection of keys (the input of a delete, say) has no
// sdfio element type to carry a coder; and they change nothing that works
// without sdfio, since Beam cannot encode any of the five on its own (its
// schema coder refuses a property's interface{} value and overflows the
// stack on the recursive key: internal/globaltest's
// TestDatastoreCodersOnlyForTypesBeamCannotEncode, which fails the day
// Beam can). A coder the program registers for one of them replaces
// datastoreio's.
package beamtypes
