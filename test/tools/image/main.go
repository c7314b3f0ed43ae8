// Command image builds embedops' images without a container runtime, on an
// empty base with go-containerregistry: by default the controller image
// (cmd/controller and cmd/embedops as static Linux binaries, CA
// certificates, a non-root user); with -package, a single-binary image of
// one main package of the repository, such as the stand-ins a real node's
// pods run. It writes an OCI image layout (make image) or a docker-archive
// tarball that `ctr images import` loads.
//
//	go run . -repo ../../.. -o ../../../bin/image
//	go run . -repo ../../.. -format docker-archive -o ../../../bin/images/pause.tar \
//		-package ./test/standin/pause -binary /pause -user 65535:65535 -ref embedops-pause:latest
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// list is a repeatable flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, " ") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var opts options
	var refs, consts, examples, cmd, env list
	flag.StringVar(&opts.repo, "repo", ".", "The embedops repository root.")
	flag.StringVar(&opts.out, "o", "bin/image", "The OCI image layout directory or the tarball to write; it is replaced.")
	flag.StringVar(&opts.format, "format", formatLayout, "What to write: "+formatLayout+" or "+formatArchive+".")
	flag.Var(&refs, "ref", "An image name: the layout records the first (org.opencontainers.image.ref.name), the archive tags each, fully qualified (default embedops-controller:latest); repeatable.")
	flag.Var(&consts, "ref-const", "An image name read from a string constant of the repository, <package directory>.<Name> (api/v1alpha1.DefaultImage); repeatable.")
	flag.Var(&examples, "ref-example", "An image name read from spec.image of an example manifest of the repository (examples/advanced.yaml); repeatable.")
	flag.StringVar(&opts.arch, "arch", runtime.GOARCH, "The GOARCH of the binaries and the image.")
	flag.StringVar(&opts.caBundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt",
		"The CA certificates copied to /etc/ssl/certs/ca-certificates.crt, so the image's programs reach HTTPS servers (the model hub).")
	flag.StringVar(&opts.pkg, "package", "", "Build a single-binary image of this main package (./test/standin/tei) instead of the controller image.")
	flag.StringVar(&opts.binaryPath, "binary", "", "With -package: the binary's path in the image, its entrypoint (default /<package's last element>).")
	flag.Var(&cmd, "cmd", "With -package: a default argument (the image's Cmd); repeatable.")
	flag.Var(&env, "env", "With -package: a NAME=value of the image's environment; repeatable.")
	flag.StringVar(&opts.user, "user", nonRootUser, "With -package: the uid:gid the image runs as; empty runs as root.")
	flag.Parse()
	opts.cmd, opts.env = cmd, env
	if err := resolveRefs(&opts, refs, consts, examples); err != nil {
		fail(err)
	}
	if opts.pkg != "" && opts.binaryPath == "" {
		opts.binaryPath = "/" + opts.pkg[strings.LastIndex(opts.pkg, "/")+1:]
	}
	digest, err := run(opts)
	if err != nil {
		fail(err)
	}
	fmt.Printf("image: wrote %s (%s, linux/%s, %s) to %s\n", strings.Join(opts.refs, ", "), digest, opts.arch, opts.format, opts.out)
}

// resolveRefs sets opts.refs from the names given, those read from
// constants and examples, or the controller's default name.
func resolveRefs(opts *options, refs, consts, examples []string) error {
	opts.refs = refs
	for _, c := range consts {
		ref, err := goConstant(opts.repo, c)
		if err != nil {
			return err
		}
		opts.refs = append(opts.refs, ref)
	}
	for _, e := range examples {
		ref, err := exampleImage(opts.repo, e)
		if err != nil {
			return err
		}
		opts.refs = append(opts.refs, ref)
	}
	if len(opts.refs) == 0 && opts.pkg == "" {
		opts.refs = []string{"embedops-controller:latest"}
	}
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}
