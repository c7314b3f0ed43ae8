// Package controller holds embedops' reconcilers. It is the only package that
// writes to the API server.
//
// The RBAC markers below are the controller's whole permission set; `make
// manifests` turns them into config/rbac/role.yaml. Secrets are read as
// metadata and, for a referenced token key only, by get: never listed with
// their data, never written.
//
// +kubebuilder:rbac:groups=embedops.dev,resources=embeddingservers;modelcachebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=embedops.dev,resources=embeddingservers/status;modelcachebindings/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=embedops.dev,resources=embeddingservers/finalizers;modelcachebindings/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods;persistentvolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get;list;watch
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories;buckets,verbs=get;list;watch
// +kubebuilder:rbac:groups=argoproj.io,resources=applications,verbs=get;list;watch
package controller
