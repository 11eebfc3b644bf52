package daemon

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/badger/v4/table"
	"google.golang.org/protobuf/proto"
)

// copyStore copies the store's files (not LOCK, not subdirectories) into a
// new temporary directory, holes left as holes; skip leaves files out.
// Beside puts the copy next to the store, on its filesystem (sized for
// it); where that cannot be, and otherwise, the copy goes to the system's
// temporary directory.
func copyStore(dir string, skip func(fs.FileInfo) bool, beside bool) (string, error) {
	var tmp string
	var err error
	if beside {
		if tmp, err = os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".check-"); err != nil {
			beside = false
		}
	}
	if !beside {
		if tmp, err = os.MkdirTemp("", "gossipd-store-"); err != nil {
			return "", err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || e.Name() == "LOCK" || (skip != nil && skip(fi)) {
			continue
		}
		// Every file is copied, none linked: badger deletes a table by
		// truncating it first, which through a link would empty the
		// store's own.
		if err := copySparse(filepath.Join(dir, e.Name()), filepath.Join(tmp, e.Name()), fi.Size()); err != nil {
			os.RemoveAll(tmp)
			if beside { // no room beside it: the temporary directory may have
				return copyStore(dir, skip, false)
			}
			return "", err
		}
	}
	return tmp, nil
}

// copySparse copies src to dst, seeking over blocks of zeros (badger's
// logs are mostly holes).
func copySparse(src, dst string, size int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	zero := make([]byte, len(buf))
	for {
		n, rerr := io.ReadFull(in, buf)
		if n > 0 {
			if bytes.Equal(buf[:n], zero[:n]) {
				_, err = out.Seek(int64(n), io.SeekCurrent)
			} else {
				_, err = out.Write(buf[:n])
			}
			if err != nil {
				out.Close()
				return err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			out.Close()
			return rerr
		}
	}
	if err := out.Truncate(size); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// rebuildManifest writes a MANIFEST into dir that lists every table file
// in it at level 0 (where tables may overlap; reads take each key's newest
// version), for reading a store whose own MANIFEST lost them.
func rebuildManifest(dir string) error {
	// The header (magic and versions) of the badger in use: from a new,
	// empty database.
	fresh, err := os.MkdirTemp("", "gossipd-manifest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(fresh)
	db, err := badger.Open(badgerOptions(fresh))
	if err != nil {
		return err
	}
	db.Close()
	m, err := os.ReadFile(filepath.Join(fresh, badger.ManifestFilename))
	if err != nil || len(m) < 8 {
		return fmt.Errorf("reading a new MANIFEST's header: %v", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var set pb.ManifestChangeSet
	for _, e := range entries {
		if id, ok := table.ParseFileID(e.Name()); ok {
			set.Changes = append(set.Changes, &pb.ManifestChange{Id: id, Op: pb.ManifestChange_CREATE, Level: 0,
				Compression: uint32(badgerOptions(dir).Compression)})
		}
	}
	sort.Slice(set.Changes, func(i, j int) bool { return set.Changes[i].Id < set.Changes[j].Id })
	body, err := proto.Marshal(&set)
	if err != nil {
		return err
	}
	out := append([]byte(nil), m[:8]...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(body)))
	out = binary.BigEndian.AppendUint32(out, crc32.Checksum(body, castagnoli))
	out = append(out, body...)
	return os.WriteFile(filepath.Join(dir, badger.ManifestFilename), out, 0o600)
}
