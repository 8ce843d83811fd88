package offsetsource

// NewReadFn exposes the read's DoFn to the tests of package offsetsource_test.
func NewReadFn[T any, S Source[T]](opts ...ReadOption) *readFn[T, S] {
	return newReadFn[T, S](parseOptions(opts))
}
