//go:build !unix

package populate

// freeBytes reports that free space is unknown on this platform.
func freeBytes(string) (int64, bool) { return 0, false }
