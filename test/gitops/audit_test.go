package gitops

import (
	"bytes"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/audit"
	"github.com/embedops/embedops/internal/cli"
)

// origin is the commit a binding's decision must be traced to.
type origin struct {
	binding string
	commit  string
	subject string
}

// expectAudited runs `embedops audit -o json` on the bindings, which clones
// their recorded repository from the git server into a fresh cache, and
// checks that each is Verified at its recorded commit with the expected
// origin.
func expectAudited(t *testing.T, namespace string, want []origin) {
	t.Helper()
	g := NewWithT(t)
	args := []string{"audit", "--kubeconfig", cluster.Kubeconfig, "-n", namespace, "--cache-dir", t.TempDir(), "-o", "json"}
	for _, o := range want {
		args = append(args, o.binding)
	}
	var stdout, stderr bytes.Buffer
	root := cli.NewRootCommand()
	root.SetArgs(args)
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	g.Expect(root.ExecuteContext(t.Context())).To(Succeed(), "embedops audit: %s", stderr.String())
	t.Logf("embedops audit:\n%s", stdout.String())

	var results []audit.Result
	g.Expect(json.Unmarshal(stdout.Bytes(), &results)).To(Succeed())
	g.Expect(results).To(HaveLen(len(want)))
	for i, o := range want {
		r := results[i]
		g.Expect(r.Binding).To(Equal(namespace + "/" + o.binding))
		g.Expect(r.Result).To(Equal(audit.Verified), "%s: %s %v", r.Binding, r.Reason, r.Differences)
		g.Expect(r.Reason).To(BeEmpty(), r.Binding)
		g.Expect(r.RecordedCommit).To(Equal(o.commit), r.Binding)
		g.Expect(r.OriginCommit).To(Equal(o.commit), r.Binding)
		g.Expect(r.OriginSubject).To(Equal(o.subject), r.Binding)
		g.Expect(r.OriginAuthor).To(Equal(author.Name+" <"+author.Email+">"), r.Binding)
		g.Expect(r.Server).To(Equal(namespace+"/"+serverName), r.Binding)
	}
}
