package dstest

// EmulatorPID is the emulator's process id, for tests of Stop.
func EmulatorPID(e *Emulator) int { return e.cmd.Process.Pid }

// EmulatorJar is where Start finds the emulator's jar ("" when nowhere),
// and SDKRoots the Cloud SDK roots it looks in.
var EmulatorJar, SDKRoots = func() string { jar, _ := emulatorJar(); return jar }, sdkRoots
