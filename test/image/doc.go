// Package image tests the images built without a container runtime. `make
// image` builds the controller image into a temporary OCI image layout,
// read back with the standard library: the layout's digests, the image
// config (a numeric non-root user, the controller as entrypoint) and the
// controller and embedops CLI as static Linux binaries. The TEI stand-in's
// docker-archive tarball, for a real node's containerd, carries the API's
// default TEI image name, TEI's image CMD and ENV, and starts as TEI does.
package image
