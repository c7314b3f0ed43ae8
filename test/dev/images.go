package main

import (
	"strings"

	"github.com/embedops/embedops/test/harness"
)

// controllerTag is the controller image's tag make dev installs, as a user
// sets it (`kustomize edit set image`): with config/manager's "latest" the
// API server defaults the populator's pull policy to Always, and the
// kubelet would pull it from a registry.
const controllerTag = "dev"

// controllerImageName is the controller image's name without its tag.
var controllerImageName, _, _ = strings.Cut(harness.ControllerImageRef, ":")

// realImages are the real node's images (harness.NodeImages: the sandbox,
// the controller and populator, the hub stand-in and the TEI stand-in under
// the examples' image names), the controller also tagged controllerTag.
func realImages() []harness.ImageArchive {
	images := harness.NodeImages()
	for i := range images {
		if images[i].Ref == harness.ControllerImageRef {
			images[i].ExtraRefs = append(images[i].ExtraRefs, controllerImageName+":"+controllerTag)
		}
	}
	return images
}
