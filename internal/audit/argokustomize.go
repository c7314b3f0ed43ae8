package audit

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// argoKustomize mirrors argo-cd's ApplicationSourceKustomize.
type argoKustomize struct {
	NamePrefix                string            `json:"namePrefix,omitempty"`
	NameSuffix                string            `json:"nameSuffix,omitempty"`
	Images                    []string          `json:"images,omitempty"`
	CommonLabels              map[string]string `json:"commonLabels,omitempty"`
	Version                   string            `json:"version,omitempty"`
	CommonAnnotations         map[string]string `json:"commonAnnotations,omitempty"`
	ForceCommonLabels         bool              `json:"forceCommonLabels,omitempty"`
	ForceCommonAnnotations    bool              `json:"forceCommonAnnotations,omitempty"`
	Namespace                 string            `json:"namespace,omitempty"`
	CommonAnnotationsEnvsubst bool              `json:"commonAnnotationsEnvsubst,omitempty"`
	Replicas                  []argoReplica     `json:"replicas,omitempty"`
	Patches                   []kustypes.Patch  `json:"patches,omitempty"`
	Components                []string          `json:"components,omitempty"`
	IgnoreMissingComponents   bool              `json:"ignoreMissingComponents,omitempty"`
	LabelWithoutSelector      bool              `json:"labelWithoutSelector,omitempty"`
	KubeVersion               string            `json:"kubeVersion,omitempty"`
	APIVersions               []string          `json:"apiVersions,omitempty"`
	LabelIncludeTemplates     bool              `json:"labelIncludeTemplates,omitempty"`
}

// argoReplica is argo-cd's KustomizeReplica.
type argoReplica struct {
	Name  string             `json:"name"`
	Count intstr.IntOrString `json:"count"`
}

// unsupported names the overrides the audit does not reproduce.
func (k *argoKustomize) unsupported() string {
	switch {
	case k.CommonAnnotationsEnvsubst:
		return "the Application's kustomize.commonAnnotationsEnvsubst needs Argo CD's build environment"
	case k.LabelWithoutSelector || k.LabelIncludeTemplates:
		return "the Application's kustomize label options are not reproduced by the audit"
	}
	return ""
}

// kustomize applies the Application's overrides to the kustomization as
// Argo CD's `kustomize edit` calls do (argo-cd util/kustomize/kustomize.go,
// Build), then builds with kustomize's defaults, as `kustomize build`.
func (a *argo) kustomize(fs *treeFS, dir string) *rendering {
	if k := a.source.Kustomize; k != nil {
		if err := editKustomization(fs, dir, k); err != nil {
			return &rendering{err: err}
		}
	}
	kustomizeMu.Lock()
	defer kustomizeMu.Unlock()
	defaultSchema(false)
	defer defaultSchema(true)
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, dir)
	if err != nil {
		return &rendering{err: fmt.Errorf("kustomize build: %w", err)}
	}
	data, err := resources.AsYaml()
	if err != nil {
		return &rendering{err: fmt.Errorf("encoding the build: %w", err)}
	}
	return &rendering{resources: data}
}

// editKustomization rewrites dir's kustomization with the overrides.
func editKustomization(fs *treeFS, dir string, k *argoKustomize) error {
	file := ""
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if p := path.Join(dir, name); fs.Exists(p) && !fs.IsDir(p) {
			file = p
			break
		}
	}
	if file == "" {
		return fmt.Errorf("no kustomization in %s", dir)
	}
	data, err := fs.ReadFile(file)
	if err != nil {
		return err
	}
	var kus kustypes.Kustomization
	if err := yaml.Unmarshal(data, &kus); err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	if err := applyOverrides(&kus, k, func(c string) bool { return fs.Exists(path.Join(dir, c)) }); err != nil {
		return err
	}
	out, err := yaml.Marshal(kus)
	if err != nil {
		return err
	}
	return fs.WriteFile(file, out)
}

// applyOverrides edits kus in Argo CD's order: name prefix and suffix,
// images, replicas, labels, annotations, namespace, patches, components.
func applyOverrides(kus *kustypes.Kustomization, k *argoKustomize, exists func(string) bool) error {
	if k.NamePrefix != "" {
		kus.NamePrefix = k.NamePrefix
	}
	if k.NameSuffix != "" {
		kus.NameSuffix = k.NameSuffix
	}
	for _, image := range k.Images {
		setImage(kus, image)
	}
	for _, replica := range k.Replicas {
		count, err := strconv.ParseInt(replica.Count.String(), 10, 64)
		if err != nil {
			return fmt.Errorf("replicas of %s: %w", replica.Name, err)
		}
		kus.Replicas = slices.DeleteFunc(kus.Replicas, func(r kustypes.Replica) bool { return r.Name == replica.Name })
		kus.Replicas = append(kus.Replicas, kustypes.Replica{Name: replica.Name, Count: count})
	}
	var err error
	// `kustomize edit add label` writes commonLabels, deprecated or not.
	if kus.CommonLabels, err = addEntries(kus.CommonLabels, k.CommonLabels, k.ForceCommonLabels, "label"); err != nil { //nolint:staticcheck // see above
		return err
	}
	if kus.CommonAnnotations, err = addEntries(kus.CommonAnnotations, k.CommonAnnotations, k.ForceCommonAnnotations, "annotation"); err != nil {
		return err
	}
	if k.Namespace != "" {
		kus.Namespace = k.Namespace
	}
	kus.Patches = append(kus.Patches, k.Patches...)
	for _, c := range k.Components {
		if !k.IgnoreMissingComponents || exists(c) {
			kus.Components = append(kus.Components, c)
		}
	}
	return nil
}

// addEntries is `kustomize edit add label|annotation`: an existing key is
// an error unless forced.
func addEntries(into, add map[string]string, force bool, what string) (map[string]string, error) {
	if len(add) == 0 {
		return into, nil
	}
	if into == nil {
		into = map[string]string{}
	}
	for _, key := range slices.Sorted(maps.Keys(add)) {
		if _, taken := into[key]; taken && !force {
			return nil, fmt.Errorf("%s %s already in kustomization file", what, key)
		}
		into[key] = add[key]
	}
	return into, nil
}

// setImage is `kustomize edit set image [<name>=]<newName>[:<tag>][@<digest>]`.
func setImage(kus *kustypes.Kustomization, arg string) {
	name, ref, renamed := strings.Cut(arg, "=")
	if !renamed {
		ref = arg
	}
	image := kustypes.Image{}
	if before, digest, ok := strings.Cut(ref, "@"); ok {
		ref, image.Digest = before, digest
	}
	if colon := strings.LastIndex(ref, ":"); colon > strings.LastIndex(ref, "/") {
		ref, image.NewTag = ref[:colon], ref[colon+1:]
	}
	if renamed {
		image.Name, image.NewName = name, ref
	} else {
		image.Name = ref
	}
	for i := range kus.Images {
		if kus.Images[i].Name == image.Name {
			kus.Images[i] = image
			return
		}
	}
	kus.Images = append(kus.Images, image)
}
