//go:build !linux

package daemon

// freeBytes cannot be read here: the store's space checks pass.
func freeBytes(dir string) (int64, error) { return 1 << 62, nil }

// allocate is a no-op where fallocate is not available.
func allocate(path string) error { return nil }

// lockedByOther cannot tell here; badger's own lock still refuses a second
// writer.
func lockedByOther(dir string) bool { return false }
