package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gobwas/glob"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubeyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// argoDirectory mirrors argo-cd's ApplicationSourceDirectory.
type argoDirectory struct {
	Recurse                bool            `json:"recurse,omitempty"`
	Jsonnet                json.RawMessage `json:"jsonnet,omitempty"`
	Exclude                string          `json:"exclude,omitempty"`
	Include                string          `json:"include,omitempty"`
	DisableExtensionFilter bool            `json:"disableExtensionFilter,omitempty"`
}

// Argo CD's directory rules (argo-cd reposerver/repository/repository.go,
// findManifests and getPotentiallyValidManifestFile).
var (
	argoManifestFile = regexp.MustCompile(`^.*\.(yaml|yml|json|jsonnet)$`)
	// argoSkipMarker in a file keeps it out of the render.
	argoSkipMarker = []byte("+argocd:skip-file-rendering")
)

// directory renders a plain directory: every manifest file, below it too
// when recursing, filtered by the include and exclude globs (gobwas/glob
// without separators, as argo-cd util/glob/glob.go matches them).
func (a *argo) directory(fs *treeFS, dir string) *rendering {
	var d argoDirectory
	if a.source.Directory != nil {
		d = *a.source.Directory
	}
	root := "/" + strings.TrimPrefix(path.Clean("/"+dir), "/")
	var objects []*unstructured.Unstructured
	err := fs.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(path.Clean("/"+p), root), "/")
		if info.IsDir() {
			if rel != "" && !d.Recurse {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.DisableExtensionFilter && !argoManifestFile.MatchString(info.Name()) {
			return nil
		}
		if (d.Exclude != "" && globMatch(d.Exclude, rel)) || (d.Include != "" && !globMatch(d.Include, rel)) {
			return nil
		}
		data, err := fs.ReadFile(p)
		if err != nil || bytes.Contains(data, argoSkipMarker) {
			return err
		}
		if strings.HasSuffix(info.Name(), ".jsonnet") {
			return fmt.Errorf("%s is jsonnet, which the audit does not evaluate", rel)
		}
		found, err := argoObjects(info.Name(), data)
		objects = append(objects, found...)
		return err
	})
	if err != nil {
		return &rendering{err: err}
	}
	return encoded(objects)
}

// globMatch is argo-cd's glob.Match: a pattern that does not compile
// matches nothing.
func globMatch(pattern, text string) bool {
	compiled, err := glob.Compile(pattern)
	return err == nil && compiled.Match(text)
}

// argoObjects decodes a file as Argo CD does (getObjsFromYAMLOrJSON): one
// object per JSON file; every YAML document, where a file that fails to
// parse is an error only if it looks like a manifest.
func argoObjects(name string, data []byte) ([]*unstructured.Unstructured, error) {
	if strings.HasSuffix(name, ".json") {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("failed to unmarshal %q: %w", name, err)
		}
		return []*unstructured.Unstructured{obj}, nil
	}
	decoder := kubeyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := decoder.Decode(&u)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			if len(objs) > 0 || (bytes.Contains(data, []byte("apiVersion:")) && bytes.Contains(data, []byte("kind:")) && bytes.Contains(data, []byte("metadata:"))) {
				return nil, fmt.Errorf("failed to unmarshal %q: %w", name, err)
			}
			return nil, nil
		}
		if u != nil && len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// encoded is a rendering of objects as a YAML stream.
func encoded(objects []*unstructured.Unstructured) *rendering {
	var out bytes.Buffer
	for _, obj := range objects {
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return &rendering{err: fmt.Errorf("encoding %s: %w", obj.GetName(), err)}
		}
		out.WriteString("---\n")
		out.Write(data)
	}
	return &rendering{resources: out.Bytes()}
}
