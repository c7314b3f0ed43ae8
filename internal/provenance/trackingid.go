package provenance

import (
	"errors"
	"fmt"
	"strings"
)

// TrackingIDAnnotation is where Argo CD records which Application manages an
// object.
const TrackingIDAnnotation = "argocd.argoproj.io/tracking-id"

// ErrInvalidTrackingID is wrapped by every tracking id that cannot be parsed.
var ErrInvalidTrackingID = errors.New("invalid Argo CD tracking id")

// TrackingID is a parsed `<app>:<group>/<kind>:<namespace>/<name>`.
type TrackingID struct {
	// AppNamespace is set for the `<namespace>_<app>` form (Applications in
	// any namespace); empty means Argo CD's own namespace.
	AppNamespace string
	// AppName is the Application's name.
	AppName string
	// Group, Kind, Namespace and Name identify the tracked object.
	Group, Kind, Namespace, Name string
}

// ParseTrackingID parses an Argo CD tracking id.
func ParseTrackingID(s string) (TrackingID, error) {
	app, rest, ok := strings.Cut(s, ":")
	groupKind, namespaceName, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || app == "" {
		return TrackingID{}, fmt.Errorf("%w: %q is not <app>:<group>/<kind>:<namespace>/<name>", ErrInvalidTrackingID, s)
	}
	group, kind, ok := strings.Cut(groupKind, "/")
	if !ok || kind == "" {
		return TrackingID{}, fmt.Errorf("%w: %q has no <group>/<kind>", ErrInvalidTrackingID, s)
	}
	namespace, name, ok := strings.Cut(namespaceName, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return TrackingID{}, fmt.Errorf("%w: %q has no <namespace>/<name>", ErrInvalidTrackingID, s)
	}
	id := TrackingID{AppName: app, Group: group, Kind: kind, Namespace: namespace, Name: name}
	// Application names are DNS labels, so an underscore separates the
	// Application's namespace from its name.
	if appNamespace, appName, found := strings.Cut(app, "_"); found {
		if appNamespace == "" || appName == "" {
			return TrackingID{}, fmt.Errorf("%w: %q has an empty Application namespace or name", ErrInvalidTrackingID, s)
		}
		id.AppNamespace, id.AppName = appNamespace, appName
	}
	return id, nil
}

// String formats the id as Argo CD writes it.
func (t TrackingID) String() string {
	app := t.AppName
	if t.AppNamespace != "" {
		app = t.AppNamespace + "_" + app
	}
	return app + ":" + t.Group + "/" + t.Kind + ":" + t.Namespace + "/" + t.Name
}
