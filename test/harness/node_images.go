package harness

import (
	"maps"
	"slices"

	"github.com/embedops/embedops/internal/tei"
)

// ControllerImageRef is the controller image's name, config/manager's
// (deployment.yaml; --populator-image follows it).
const ControllerImageRef = "embedops-controller:latest"

// ControllerImage is the controller image as `make image` builds it
// (controller and embedops, CA certificates, uid 65532), also the
// populator's.
var ControllerImage = ImageArchive{File: "embedops-controller.tar", Ref: ControllerImageRef}

// HubImage serves test/standin/hub: the hub hubtest plays, over HTTP.
var HubImage = ImageArchive{
	File: "hub-standin.tar", Package: "./test/standin/hub", Binary: "/hub", User: "65534:65534", Ref: "embedops-hub-standin:latest",
}

// teiRouter is where TEI's images keep the server, their ENTRYPOINT
// (Dockerfile, v1.9.3: COPY ... /usr/local/bin/text-embeddings-router).
const teiRouter = "/usr/local/bin/text-embeddings-router"

// TEIImage is the TEI stand-in under the CPU image's name, the API's
// default (api/v1alpha1.DefaultImage), laid out as TEI's Dockerfile lays
// it out: the router as entrypoint, CMD ["--json-output"], its ENV
// (tei.ImageEnv), running as root as TEI's images do.
var TEIImage = ImageArchive{
	File: "tei-standin.tar", Package: "./test/standin/tei", Binary: teiRouter, Cmd: []string{"--json-output"}, Env: teiImageEnv(),
	Ref: "embedops-tei-standin:latest", RefConsts: []string{"api/v1alpha1.DefaultImage"},
}

// TEICUDAImage is the TEI stand-in under the CUDA image name
// examples/advanced.yaml gives, with the candle backend only, as TEI's
// CUDA images are built (Dockerfile-cuda).
var TEICUDAImage = ImageArchive{
	File: "tei-standin-cuda.tar", Package: TEIImage.Package, Binary: teiRouter, Cmd: TEIImage.Cmd,
	Env: append(teiImageEnv(), "EMBEDOPS_STANDIN_BACKENDS=candle"),
	Ref: "embedops-tei-standin-cuda:latest", RefExamples: []string{"examples/advanced.yaml"},
}

// teiImageEnv is tei.ImageEnv as NAME=value entries, sorted.
func teiImageEnv() []string {
	var env []string
	for _, name := range slices.Sorted(maps.Keys(tei.ImageEnv)) {
		env = append(env, name+"="+tei.ImageEnv[name])
	}
	return env
}
