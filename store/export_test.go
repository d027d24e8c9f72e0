package store

// SetBeforeSplitWrite makes st call f in completeSplit between its
// fence-state read and its writes (a run can turn stale in that window).
func SetBeforeSplitWrite(st *Store, f func()) { st.beforeSplitWrite = f }
