// Package builder turns an EmbeddingServer into the children the controller
// applies: a StatefulSet running TEI, two Services, and, when the spec asks
// for them, a PodDisruptionBudget (two replicas or more) and a NetworkPolicy
// (spec.networkPolicy set); their builders return nil otherwise.
//
// Invariants:
//   - Pure: no clients, no I/O, no clock. The same inputs give byte-for-byte
//     the same objects, so server-side apply sees no drift.
//   - Every returned object has its TypeMeta, the server's namespace and
//     Labels(server), and no owner references: the controller sets those.
//   - The pod template carries the owner labels, because the controller's Pod
//     informer is filtered on them.
//   - A PerReplica cache with a PopulatorImage gets the init container
//     PopulateContainerName, which fills the replica's claim and leaves its
//     result as the termination message. It downloads only what the TEI
//     image reads. A patch may not remove it or change what it runs.
//   - Once a populator recorded the commit (Cache.ResolvedCommit), TEI and
//     the populator run --revision=<commit>: every replica serves the same
//     weights whatever the branch does, and /info's model_sha is that commit.
//     TEI gets no HF_HUB_OFFLINE, which it never reads: hf-hub finds the
//     populated files through refs/<revision>.
//   - A Cache that is Existing (spec.cache.existingClaim) is the user's
//     claim: mounted read-only by every pod, never templated, labelled or
//     written; its Job (PopulateJob) only verifies it, offline, with no
//     environment; TEI runs the spec's revision on it, never a pinned
//     commit, since nothing writes refs/<commit> there.
//   - Every TEI container parses under TEI's own command line
//     (internal/tei, router/src/main.rs of the pinned tag): the token as
//     HF_TOKEN only, the image's CMD --json-output kept, --hostname the
//     wildcard of the pod's address family (Facts.IPv6).
//   - The downloader (init container and Job) gets the hub, network, token
//     and CA settings TEI gets; the Job also the server pod's placement and
//     pull secrets, and Facts.PopulateDeadline.
//   - Nothing without an owner reference (PerReplica claims) carries a
//     GitOps tracking key (TrackingKeys).
//   - TEI's Prometheus port is the container port and Service port
//     "metrics" (9000 unless PROMETHEUS_PORT or --prometheus-port say
//     otherwise).
//   - spec.podTemplate is applied as a strategic-merge patch over the
//     generated pod template. A patch that cannot be applied, or that would
//     take away what the operator relies on, is an error wrapping
//     ErrInvalidPodTemplate; it is never ignored. As with kubectl patch, list
//     items a patch adds come before the generated ones unless the patch
//     orders them with $setElementOrder.
package builder
