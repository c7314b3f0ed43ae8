// Command image builds embedops' controller image without a container
// runtime: it compiles cmd/controller and cmd/embedops as static Linux
// binaries and writes an OCI image layout holding one image, on an empty
// base, with the two binaries, CA certificates and a non-root user.
//
//	go run . -repo ../../.. -o ../../../bin/image
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
)

func main() {
	var opts options
	flag.StringVar(&opts.repo, "repo", ".", "The embedops repository root.")
	flag.StringVar(&opts.out, "o", "bin/image", "The OCI image layout directory to write; it is replaced.")
	flag.StringVar(&opts.ref, "ref", "embedops-controller:latest", "The image name recorded in the layout's index (org.opencontainers.image.ref.name).")
	flag.StringVar(&opts.arch, "arch", runtime.GOARCH, "The GOARCH of the binaries and the image.")
	flag.StringVar(&opts.caBundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt",
		"The CA certificates copied to /etc/ssl/certs/ca-certificates.crt, so the populator reaches the model hub over HTTPS.")
	flag.Parse()
	digest, err := run(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("image: wrote %s (%s, linux/%s) to %s\n", opts.ref, digest, opts.arch, opts.out)
}
