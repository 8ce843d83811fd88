// Package demo holds what the example programs under examples/ are checked
// against; the examples themselves import nothing of it (they are
// programs a user can copy out of the module, so they import only public
// packages). It has the reference line for each counter of the module's
// IOs, which TestEveryCounterExplained keeps complete and which each
// example's own counterHelp map must quote word for word
// (TestExamplesExplainCountersAsTheReference), and the tests that build
// a copy of every example outside the module and that no example imports
// an internal package.
package demo

// explanations says in a line what each counter of the module's IOs counts.
var explanations = map[string]string{
	"records":         "records read and emitted",
	"rows":            "rows read and emitted",
	"entities":        "entities read and emitted",
	"bytes_read":      "bytes of the files consumed by the reads",
	"bytes":           "bytes of payload the reads received",
	"splits_accepted": "runner split requests accepted while reading: work handed to another bundle (dynamic rebalancing)",
	"splits_refused":  "runner split requests refused (the split point was already read, or too little was left)",
	"streams":         "Storage Read API streams the read session planned, one restriction each",
	"retries":         "requests retried after a transient error",
	"queries":         "queries run against the service (one per key range read)",
	"pages":           "result pages the queries returned",
	"initial_splits":  "key ranges planned from the kind's __scatter__ keys before reading",
	"sub_ranges":      "sub-ranges the key ranges were cut into for the runner to split at",
	"files_matched":   "files the pattern matched",
	"ranges_read":     "ranges of files opened: initial bundles and the pieces runner splits made",

	"records_written":    "records written",
	"bytes_written":      "bytes written",
	"files_written":      "files committed",
	"temp_files_removed": "temporary files removed after the commit",
	"entities_written":   "entities upserted",
	"entities_deleted":   "entities deleted",
	"commits":            "commit requests sent",
	"commit_retries":     "commits retried after a transient error",
	"throttled_msecs":    "milliseconds waited for ramp-up throttling (500 writes a second, +50% every 5 minutes)",
	"throttled_commits":  "commits held back by adaptive throttling after the service pushed back",

	"watch_polls":                 "times the watch matched the pattern again",
	"watch_new_files":             "files the watch found that it had not seen",
	"watch_updated_files":         "files read again because they changed (MatchUpdatedFiles)",
	"watch_files_waiting":         "files seen but not read yet: still being written (size or time changing)",
	"watch_files_skipped":         "files a poll skipped: older than WithSkipOlderThan, or named in WithSkipListed's list",
	"bad_inputs":                  "bad files or blocks put in the bad-files output (ReadWithBadFiles) instead of failing the read",
	"watch_changed_files_ignored": "files that changed after they were read, not read again",
	"watch_empty_files_skipped":   "empty files the watch did not emit",
	"adaptive_throttled_msecs":    "milliseconds waited for adaptive throttling",
	"rows_appended":               "rows appended to write streams",
	"streams_created":             "BUFFERED write streams created by the exactly-once streaming write",
	"streams_finalized":           "write streams finalized (rotated, idle or at the end of input)",
	"rows_flushed":                "rows made visible by FlushRows",
	"batches_repeated":            "batches delivered again and skipped (already appended)",
	"streams_abandoned":           "streams left at their committed offset after an append met a retried or replayed attempt's rows (ALREADY_EXISTS); the batch went to a new stream",
	"connections_closed":          "write streams' connections closed after the idle time, or past 64 open in a worker",
	"bytes_appended":              "bytes of rows appended",
	"appends":                     "AppendRows requests sent",
	"append_retries":              "appends retried after a transient error",
	"rows_refused":                "rows the service refused, sent to the failed-rows output",
	"streams_committed":           "write streams committed",
}

// Explain returns the line that says what counter name counts, or "".
func Explain(name string) string { return explanations[name] }
