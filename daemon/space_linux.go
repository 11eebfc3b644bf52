package daemon

import (
	"os"
	"syscall"
)

// freeBytes is the space an unprivileged writer may still use on the
// filesystem that holds dir.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// allocate makes the filesystem back every page of the file at path up
// to its size (fallocate, mode 0: the size and contents stay), so that
// writes through a memory map of it cannot fault for want of space. It
// fails with ENOSPC where the space is not there.
func allocate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Blocks*512 >= st.Size() {
		return nil // every page is backed already
	}
	for {
		err = syscall.Fallocate(int(f.Fd()), 0, 0, st.Size())
		if err != syscall.EINTR {
			break
		}
	}
	if err == syscall.EOPNOTSUPP {
		return nil // the filesystem cannot say; the free-space check stands alone
	}
	return err
}

// lockedByOther says whether another process holds badger's lock on the
// directory dir (an exclusive flock of the directory): a running daemon.
func lockedByOther(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return err == syscall.EWOULDBLOCK
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
