package bigqueryio

import (
	"fmt"

	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
)

// A ReadRows response says how many rows it holds twice over: in its
// row_count, and in its payload, whose rows the decoders count themselves
// (Avro rows until the serialized bytes end, the lengths of the Arrow
// record batches). The two must agree: a count that disagrees with the
// payload is the server contradicting itself, and taking either side would
// lose rows or shift every offset after it. So the decoders decode what the
// payload holds, whatever the count says, and fail when the two differ.

// rowCount is the number of rows a response says it holds: its row_count,
// or, when only that is set, the deprecated count inside its rows
// (AvroRows.row_count, ArrowRecordBatch.row_count), which servers sent
// before row_count existed. Both set and different, or a negative count, is
// an error.
func rowCount(r *storagepb.ReadRowsResponse) (int64, error) {
	outer := r.GetRowCount()
	var inner int64
	field := ""
	if a := r.GetAvroRows(); a != nil {
		inner, field = a.GetRowCount(), "avro_rows.row_count"
	} else if b := r.GetArrowRecordBatch(); b != nil {
		inner, field = b.GetRowCount(), "arrow_record_batch.row_count"
	}
	switch {
	case outer < 0:
		return 0, fmt.Errorf("the response's row_count is %d", outer)
	case inner < 0:
		return 0, fmt.Errorf("the response's %s (deprecated) is %d", field, inner)
	case outer != 0 && inner != 0 && outer != inner:
		return 0, fmt.Errorf("the response's row_count is %d, its %s (deprecated) %d", outer, field, inner)
	case outer == 0:
		return inner, nil
	}
	return outer, nil
}

// holdsRows reports whether a response has rows (by its count) or a
// payload that may hold some.
func holdsRows(r *storagepb.ReadRowsResponse) bool {
	n, err := rowCount(r)
	return err != nil || n > 0 || len(payloadOf(r)) > 0
}

// countMismatch is the error of a response whose count says n rows and
// whose payload holds got.
func countMismatch(n, got int64) error {
	return fmt.Errorf("the response's row count is %d, but its payload holds %d rows (the server contradicts itself; no row of it was emitted)", n, got)
}

// arrowRows checks the length m of a record batch, after got rows of the
// response: a BigQuery column takes at least a bit per row (of its
// validity bitmap or its values), so a length beyond what the payload's
// bits can hold is refused before anything of its size is allocated.
func arrowRows(m, got int64, payload []byte) error {
	if m < 0 || got+m > 8*int64(len(payload))+64 {
		return fmt.Errorf("an Arrow record batch of %d rows (after %d) in %d bytes", m, got, len(payload))
	}
	return nil
}
