package populate

import (
	"bytes"
	"cmp"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"strconv"
)

// contentTag opens the content digest's encoding; see the package documentation.
const contentTag = "embedops.dev/content/v1"

// FileDigest is one file of a snapshot: its path in the repository and the
// lowercase hex sha256 of its content.
type FileDigest struct {
	Name   string
	SHA256 string
}

// ContentDigest returns the content digest of a snapshot's files, in any
// order: "sha256:" and the hex SHA-256 of the version 1 encoding described in
// the package documentation.
func ContentDigest(files []FileDigest) string {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b FileDigest) int { return cmp.Compare(a.Name, b.Name) })
	var encoding bytes.Buffer
	netstring(&encoding, contentTag)
	netstring(&encoding, strconv.Itoa(len(sorted)))
	for _, f := range sorted {
		netstring(&encoding, f.Name)
		netstring(&encoding, f.SHA256)
	}
	sum := sha256.Sum256(encoding.Bytes())
	return "sha256:" + hex.EncodeToString(sum[:])
}

// netstring appends "<decimal byte length>:<s>,".
func netstring(b *bytes.Buffer, s string) {
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
	b.WriteByte(',')
}

// digestOf returns the content digest of verified files.
func digestOf(files []fileRecord) string {
	digests := make([]FileDigest, 0, len(files))
	for _, f := range files {
		digests = append(digests, FileDigest{Name: f.Name, SHA256: f.SHA256})
	}
	return ContentDigest(digests)
}

// expectation is what a file must match: its size, and its sha256 (LFS
// files) or its git blob id (other files).
type expectation struct {
	size    int64
	sha256  string
	gitBlob string
}

// digester hashes content as it is written and checks it against an expectation.
type digester struct {
	want    expectation
	sha256  hash.Hash
	gitBlob hash.Hash
	n       int64
}

func newDigester(want expectation) *digester {
	d := &digester{want: want, sha256: sha256.New()}
	if want.gitBlob != "" {
		d.gitBlob = sha1.New() // git blob ids are sha1; checked for integrity against the listing
		fmt.Fprintf(d.gitBlob, "blob %d\x00", want.size)
	}
	return d
}

// Write hashes p; it never fails.
func (d *digester) Write(p []byte) (int, error) {
	d.sha256.Write(p)
	if d.gitBlob != nil {
		d.gitBlob.Write(p)
	}
	d.n += int64(len(p))
	return len(p), nil
}

// check returns the content's sha256, or an error wrapping ErrCorrupt if the
// content does not match the expectation.
func (d *digester) check(name string) (string, error) {
	if d.n != d.want.size {
		return "", fmt.Errorf("%w: %s has %d bytes, the hub listed %d", ErrCorrupt, name, d.n, d.want.size)
	}
	sum := hex.EncodeToString(d.sha256.Sum(nil))
	if d.want.sha256 != "" && sum != d.want.sha256 {
		return "", fmt.Errorf("%w: %s has sha256 %s, the hub listed %s", ErrCorrupt, name, sum, d.want.sha256)
	}
	if d.gitBlob != nil {
		if id := hex.EncodeToString(d.gitBlob.Sum(nil)); id != d.want.gitBlob {
			return "", fmt.Errorf("%w: %s has git blob id %s, the hub listed %s", ErrCorrupt, name, id, d.want.gitBlob)
		}
	}
	return sum, nil
}
