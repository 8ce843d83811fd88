// Package lifecycle holds a test only: every production DoFn of the module
// (the DoFns registered through internal/beamreg, enumerated from its
// registry, so a new one is covered without a change here) runs in a
// pipeline whose SDK workers are separate processes (internal/workertest),
// and each lifecycle method it has (Setup, StartBundle, FinishBundle) must
// have been called by Beam in a worker process, as seen through
// beamreg.SetLifecycleHook. It fails on any Beam version where Beam stops
// calling one of them, and when a DoFn with lifecycle methods is added
// that none of the test's pipeline shapes runs (add a shape for it).
//
// Teardown is checked differently: Beam Go's SDK harness never calls it
// (exec.Plan.Down is called by the direct runner only; Beam's contract
// makes Teardown best effort), so the test checks that the DoFn's struct
// wrapper gives Beam its Teardown, as register's does, and nothing relies
// on it being called.
package lifecycle
