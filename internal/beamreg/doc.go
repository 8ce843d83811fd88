// Package beamreg registers the module's DoFns with Beam as Beam's
// register package does, for a fraction of the binary size.
//
// register.DoFnNxM (Beam v2.78) registers a DoFn's type with Beam's type
// registry and schema registry, the struct types of its ProcessElement's
// parameters and results with the schema registry (and with the type
// registry when they are named: an unnamed struct has no type key, and
// Beam encodes it field by field), a reflection-free caller for
// ProcessElement, and a struct wrapper that gives Beam ProcessElement,
// StartBundle, FinishBundle, Setup and Teardown. register builds the
// lifecycle entries by a type switch over every signature those methods
// may have, instantiated for each DoFn registered: with Beam's
// reflection-driven linking (graph.NewFn calls reflect.Value.Method, so
// every exported method of those generic types stays), each
// register.DoFnNxM call costs about 1 MB of machine code and 5 MB of
// binary. A program that only reads Avro files linked 17 of them (avroio's
// writes and watches among them), against the 9 of the same program on
// Beam Go's own avroio.
//
// DoFnNxM here follows the same rules: the same types registered, the
// same ProcessElement caller (register.FunctionNxM's for ProcessElement's
// function type, found by reflectx.MakeFunc), and a struct wrapper with
// the same five entries. Its lifecycle entries are the DoFn's own methods
// called through reflection (reflectx.MakeFunc of the method value, what
// Beam's graph.NewFn would do itself for a method the wrapper lacks): they
// run once per bundle or per DoFn instance, where a reflective call costs
// nothing that shows. Workers find every DoFn registered, as with
// register: the registration is in the same init functions.
//
// DoFns lists every DoFn registered here, and SetLifecycleHook lets a test
// see each call Beam makes of a lifecycle method, in every process of a
// job (internal/lifecycle runs every production DoFn on separate worker
// processes and checks them). Beam Go's SDK harness never calls Teardown
// (exec.Plan.Down is only called by the direct runner): Beam's contract
// makes Teardown best effort, so no DoFn here relies on it.
package beamreg
