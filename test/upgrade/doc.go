// Package upgrade checks that embedops upgrades in place (README,
// Upgrades): the previous release's CRDs, examples and controller, read
// from the git history at the commit BASELINE names, run on envtest until
// every server is Ready; then the working tree's CRDs are installed and
// its controller started, and every object must be readable, reconciled
// and unchanged where a change would restart a server or rewrite a
// binding's record. The Helm tests install the previous release's chart
// on a control plane of their own and `helm upgrade` it to the working
// tree's, as README says.
//
// The previous controller is built from the baseline's tree into
// bin/upgrade/controller-<commit>, once (make tools builds it too).
package upgrade
