// Package image tests `make image`: it builds the controller image into a
// temporary OCI image layout and reads it back with the standard library,
// checking the layout's digests, the image config (a numeric non-root
// user, the controller as entrypoint) and that the controller and the
// embedops CLI are in it as static Linux binaries.
package image
