package dstest

// EmulatorPID is the emulator's process id, for tests of Stop.
func EmulatorPID(e *Emulator) int { return e.cmd.Process.Pid }
