// Command images builds the real node's images (harness.NodeImages) as
// docker-archive tarballs into a directory, for `make images`:
//
//	go run ./test/harness/images -o bin/images
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/embedops/embedops/test/harness"
)

func main() {
	out := flag.String("o", "bin/images", "The directory to write the archives to.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	archives, err := harness.BuildImages(ctx, *out, harness.NodeImages()...)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
	for i, image := range harness.NodeImages() {
		fmt.Printf("images: %s in %s\n", image.Ref, archives[i])
	}
}
