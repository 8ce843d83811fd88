package sdf

// SplitIntoBundles cuts r into initial bundles the way Beam Java's
// OffsetBasedSource does. The desired size is desiredBundleSizeBytes divided
// by bytesPerOffset, at least 1 offset and at least minBundleSize offsets.
// Pieces of that size are cut from Start; when what would remain after a piece
// is less than a quarter of the desired size, or less than minBundleSize, the
// piece takes the rest of the range instead. An empty range gives no pieces;
// an unbounded range is returned whole.
//
// bytesPerOffset <= 0 counts as 1.
func SplitIntoBundles(r OffsetRange, desiredBundleSizeBytes, minBundleSize, bytesPerOffset int64) []OffsetRange {
	if r.IsEmpty() {
		return nil
	}
	if !r.IsBounded() {
		return []OffsetRange{r}
	}
	if bytesPerOffset <= 0 {
		bytesPerOffset = 1
	}
	desired := desiredBundleSizeBytes / bytesPerOffset
	if desired < 1 {
		desired = 1
	}
	if desired < minBundleSize {
		desired = minBundleSize
	}
	var out []OffsetRange
	for start := r.Start; start < r.End; {
		end := r.End
		if r.End-start > desired {
			end = start + desired
		}
		if rest := r.End - end; rest < desired/4 || rest < minBundleSize {
			end = r.End
		}
		out = append(out, OffsetRange{Start: start, End: end})
		start = end
	}
	return out
}
