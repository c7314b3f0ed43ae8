// Package schema checks, when the controller starts, that the cluster's
// embedops CRDs are not older than the controller: each carries
// embedopsv1.SchemaVersionAnnotation, and a CRD behind the controller's
// embedopsv1.SchemaVersion would silently drop fields the controller
// writes (a `helm upgrade` leaves crds/ as they were).
//
// A CRD newer than the controller is accepted: it keeps every field an
// older controller writes. So after a rollback that left the newer CRDs
// (charts/embedops never lowers their version) the older controller
// starts and works over them.
//
// It owns that comparison and its message. It only reads the two CRDs; it
// must not install or change them.
package schema
