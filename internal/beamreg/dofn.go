package beamreg

import "github.com/apache/beam/sdks/v2/go/pkg/beam/register"

// One function per arity of ProcessElement (inputs x outputs) that the
// module's DoFns have; add one when a DoFn needs another.

// DoFn1x0 is register.DoFn1x0, its lifecycle methods called by reflection.
func DoFn1x0[I0 any](doFn interface{ ProcessElement(I0) }) {
	register.Function1x0(func(I0) {})
	wrap(doFn, func(fn any) any { return fn.(interface{ ProcessElement(I0) }).ProcessElement })
}

// DoFn1x1 is register.DoFn1x1, its lifecycle methods called by reflection.
func DoFn1x1[I0, R0 any](doFn interface{ ProcessElement(I0) R0 }) {
	register.Function1x1(func(I0) R0 { panic(unreachable) })
	wrap(doFn, func(fn any) any { return fn.(interface{ ProcessElement(I0) R0 }).ProcessElement })
}

// DoFn1x2 is register.DoFn1x2, its lifecycle methods called by reflection.
func DoFn1x2[I0, R0, R1 any](doFn interface{ ProcessElement(I0) (R0, R1) }) {
	register.Function1x2(func(I0) (R0, R1) { panic(unreachable) })
	wrap(doFn, func(fn any) any { return fn.(interface{ ProcessElement(I0) (R0, R1) }).ProcessElement })
}

// DoFn2x0 is register.DoFn2x0, its lifecycle methods called by reflection.
func DoFn2x0[I0, I1 any](doFn interface{ ProcessElement(I0, I1) }) {
	register.Function2x0(func(I0, I1) {})
	wrap(doFn, func(fn any) any { return fn.(interface{ ProcessElement(I0, I1) }).ProcessElement })
}

// DoFn2x1 is register.DoFn2x1, its lifecycle methods called by reflection.
func DoFn2x1[I0, I1, R0 any](doFn interface{ ProcessElement(I0, I1) R0 }) {
	register.Function2x1(func(I0, I1) R0 { panic(unreachable) })
	wrap(doFn, func(fn any) any { return fn.(interface{ ProcessElement(I0, I1) R0 }).ProcessElement })
}

// DoFn3x0 is register.DoFn3x0, its lifecycle methods called by reflection.
func DoFn3x0[I0, I1, I2 any](doFn interface{ ProcessElement(I0, I1, I2) }) {
	register.Function3x0(func(I0, I1, I2) {})
	wrap(doFn, func(fn any) any { return fn.(interface{ ProcessElement(I0, I1, I2) }).ProcessElement })
}

// DoFn3x1 is register.DoFn3x1, its lifecycle methods called by reflection.
func DoFn3x1[I0, I1, I2, R0 any](doFn interface{ ProcessElement(I0, I1, I2) R0 }) {
	register.Function3x1(func(I0, I1, I2) R0 { panic(unreachable) })
	wrap(doFn, func(fn any) any { return fn.(interface{ ProcessElement(I0, I1, I2) R0 }).ProcessElement })
}

// DoFn4x0 is register.DoFn4x0, its lifecycle methods called by reflection.
func DoFn4x0[I0, I1, I2, I3 any](doFn interface{ ProcessElement(I0, I1, I2, I3) }) {
	register.Function4x0(func(I0, I1, I2, I3) {})
	wrap(doFn, func(fn any) any { return fn.(interface{ ProcessElement(I0, I1, I2, I3) }).ProcessElement })
}

// DoFn4x1 is register.DoFn4x1, its lifecycle methods called by reflection.
func DoFn4x1[I0, I1, I2, I3, R0 any](doFn interface{ ProcessElement(I0, I1, I2, I3) R0 }) {
	register.Function4x1(func(I0, I1, I2, I3) R0 { panic(unreachable) })
	wrap(doFn, func(fn any) any { return fn.(interface{ ProcessElement(I0, I1, I2, I3) R0 }).ProcessElement })
}

// DoFn5x0 is register.DoFn5x0, its lifecycle methods called by reflection.
func DoFn5x0[I0, I1, I2, I3, I4 any](doFn interface{ ProcessElement(I0, I1, I2, I3, I4) }) {
	register.Function5x0(func(I0, I1, I2, I3, I4) {})
	wrap(doFn, func(fn any) any { return fn.(interface{ ProcessElement(I0, I1, I2, I3, I4) }).ProcessElement })
}

// DoFn5x1 is register.DoFn5x1, its lifecycle methods called by reflection.
func DoFn5x1[I0, I1, I2, I3, I4, R0 any](doFn interface{ ProcessElement(I0, I1, I2, I3, I4) R0 }) {
	register.Function5x1(func(I0, I1, I2, I3, I4) R0 { panic(unreachable) })
	wrap(doFn, func(fn any) any { return fn.(interface{ ProcessElement(I0, I1, I2, I3, I4) R0 }).ProcessElement })
}

// DoFn5x2 is register.DoFn5x2, its lifecycle methods called by reflection.
func DoFn5x2[I0, I1, I2, I3, I4, R0, R1 any](doFn interface {
	ProcessElement(I0, I1, I2, I3, I4) (R0, R1)
}) {
	register.Function5x2(func(I0, I1, I2, I3, I4) (R0, R1) { panic(unreachable) })
	wrap(doFn, func(fn any) any {
		return fn.(interface {
			ProcessElement(I0, I1, I2, I3, I4) (R0, R1)
		}).ProcessElement
	})
}

// DoFn6x0 is register.DoFn6x0, its lifecycle methods called by reflection.
func DoFn6x0[I0, I1, I2, I3, I4, I5 any](doFn interface{ ProcessElement(I0, I1, I2, I3, I4, I5) }) {
	register.Function6x0(func(I0, I1, I2, I3, I4, I5) {})
	wrap(doFn, func(fn any) any { return fn.(interface{ ProcessElement(I0, I1, I2, I3, I4, I5) }).ProcessElement })
}

// DoFn6x1 is register.DoFn6x1, its lifecycle methods called by reflection.
func DoFn6x1[I0, I1, I2, I3, I4, I5, R0 any](doFn interface {
	ProcessElement(I0, I1, I2, I3, I4, I5) R0
}) {
	register.Function6x1(func(I0, I1, I2, I3, I4, I5) R0 { panic(unreachable) })
	wrap(doFn, func(fn any) any {
		return fn.(interface {
			ProcessElement(I0, I1, I2, I3, I4, I5) R0
		}).ProcessElement
	})
}

// DoFn7x1 is register.DoFn7x1, its lifecycle methods called by reflection.
func DoFn7x1[I0, I1, I2, I3, I4, I5, I6, R0 any](doFn interface {
	ProcessElement(I0, I1, I2, I3, I4, I5, I6) R0
}) {
	register.Function7x1(func(I0, I1, I2, I3, I4, I5, I6) R0 { panic(unreachable) })
	wrap(doFn, func(fn any) any {
		return fn.(interface {
			ProcessElement(I0, I1, I2, I3, I4, I5, I6) R0
		}).ProcessElement
	})
}

// DoFn8x1 is register.DoFn8x1 without the lifecycle methods' callers.
func DoFn8x1[I0, I1, I2, I3, I4, I5, I6, I7, R0 any](doFn interface {
	ProcessElement(I0, I1, I2, I3, I4, I5, I6, I7) R0
}) {
	register.Function8x1(func(I0, I1, I2, I3, I4, I5, I6, I7) R0 { panic(unreachable) })
	wrap(doFn, func(fn any) any {
		return fn.(interface {
			ProcessElement(I0, I1, I2, I3, I4, I5, I6, I7) R0
		}).ProcessElement
	})
}
