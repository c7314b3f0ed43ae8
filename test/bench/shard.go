package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// ShardOptions shape the sharding run: Servers servers split round-robin
// between Shards shards ("shard1", "shard2", ... as in Flux's sharding
// docs), each reconciled by its own controller process started with
// --watch-label-selector=sharding.fluxcd.io/key=<shard>.
type ShardOptions struct {
	// Servers is how many EmbeddingServers are created.
	Servers int
	// Shards is how many shards, and controller processes, there are.
	Shards int
	// ProvisionDelay is the provisioner's time per volume.
	ProvisionDelay time.Duration
	// Timeout bounds each wait for the cluster.
	Timeout time.Duration
	// ControllerArgs are extra flags of every controller.
	ControllerArgs []string
	// Log receives progress lines.
	Log io.Writer
}

// shardName names the i-th shard (0-based) as Flux's docs do.
func shardName(i int) string { return "shard" + strconv.Itoa(i+1) }

// ShardAgent is the binary name, and so the user agent, of a shard's
// controller; no shard's agent starts with another's.
func ShardAgent(shard string) string { return "embedops-" + shard + "-controller" }

// ShardReport is what the audit log shows the shards wrote while their
// servers converged. The Wrong* and ServersOfTwoShards counts are zero
// when sharding holds.
type ShardReport struct {
	Servers         int              `json:"servers"`
	ConvergeSeconds float64          `json:"convergeSeconds"`
	Shards          []ShardWriteRows `json:"shards"`
	// ServersOfTwoShards counts servers that more than one shard wrote
	// (the server, its status or its children).
	ServersOfTwoShards int `json:"serversOfTwoShards"`
	// WrongServerWrites counts writes of a server, its status or its
	// children by a shard that is not the server's.
	WrongServerWrites int `json:"wrongServerWrites"`
	// WrongBindingWrites counts writes of a binding by a shard that is not
	// the one its sharding.fluxcd.io/key names.
	WrongBindingWrites int `json:"wrongBindingWrites"`
	// UnattributedWrites counts the shards' writes of objects the run
	// cannot tie to a server or a binding (events excluded).
	UnattributedWrites int `json:"unattributedWrites"`
}

// ShardWriteRows are one shard's figures.
type ShardWriteRows struct {
	Shard         string `json:"shard"`
	Servers       int    `json:"servers"`
	Bindings      int    `json:"bindings"`
	ServerWrites  int    `json:"serverWrites"`
	ChildWrites   int    `json:"childWrites"`
	BindingWrites int    `json:"bindingWrites"`
}

// Rows implements Report.
func (r *ShardReport) Rows() []Row {
	rows := []Row{
		{"servers", strconv.Itoa(r.Servers), fmt.Sprintf("split between %d shards", len(r.Shards))},
		{"converge", fmt.Sprintf("%.1fs", r.ConvergeSeconds), "until every server is Ready and bound"},
	}
	for _, s := range r.Shards {
		rows = append(rows, Row{s.Shard, fmt.Sprintf("%d servers, %d bindings", s.Servers, s.Bindings),
			fmt.Sprintf("writes: %d server, %d child, %d binding (%s)", s.ServerWrites, s.ChildWrites, s.BindingWrites, ShardAgent(s.Shard))})
	}
	return append(rows,
		Row{"servers written by two shards", strconv.Itoa(r.ServersOfTwoShards), "from the audit log, by user agent"},
		Row{"server or child writes by another shard", strconv.Itoa(r.WrongServerWrites), ""},
		Row{"binding writes by another shard", strconv.Itoa(r.WrongBindingWrites), "the binding's sharding.fluxcd.io/key names its shard"},
		Row{"unattributed writes", strconv.Itoa(r.UnattributedWrites), "events excluded"},
	)
}

// Sharded reports whether the run kept every shard to its own objects.
func (r *ShardReport) Sharded() bool {
	return r.ServersOfTwoShards == 0 && r.WrongServerWrites == 0 && r.WrongBindingWrites == 0 && r.UnattributedWrites == 0
}

// RunShards starts a cluster with one controller process per shard,
// creates the servers, waits until every one is Ready and bound, and
// attributes every write the shards made, as the API server's audit log
// recorded it, to the shard of the server or binding it wrote.
func RunShards(ctx context.Context, opts ShardOptions) (_ *ShardReport, err error) {
	shards := make([]string, opts.Shards)
	controllers := make([]ControllerSpec, opts.Shards)
	for i := range shards {
		shards[i] = shardName(i)
		controllers[i] = ControllerSpec{Agent: ShardAgent(shards[i]), Args: []string{"--watch-label-selector=" + embedopsv1.ShardLabel + "=" + shards[i]}}
	}
	nodes := ScaleOptions{Servers: opts.Servers}.Nodes()
	env, err := StartEnv(ctx, EnvOptions{Nodes: nodes, ProvisionDelay: opts.ProvisionDelay, ControllerArgs: opts.ControllerArgs, Controllers: controllers, Log: opts.Log})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			for i, controller := range env.Controllers {
				env.logf("%s log (last lines):\n%s", shards[i], lastLines(controller.Logs(), 30))
			}
		}
		err = errors.Join(err, env.Stop())
	}()
	namespace, err := env.CreateNamespace(ctx, "bench-shards-")
	if err != nil {
		return nil, err
	}
	started := time.Now()
	if err := env.createShardedServers(ctx, namespace, opts.Servers, shards); err != nil {
		return nil, err
	}
	if err := env.WaitConverged(ctx, namespace, opts.Servers, opts.Timeout); err != nil {
		return nil, err
	}
	report := &ShardReport{Servers: opts.Servers, ConvergeSeconds: round(time.Since(started).Seconds())}
	if _, err := env.settledCount(ctx, namespace, opts.Timeout); err != nil {
		return nil, err
	}
	owners, err := env.shardsOf(ctx, namespace)
	if err != nil {
		return nil, err
	}
	writes, err := ObjectWrites(env.Cluster.AuditLogPath(), namespace)
	if err != nil {
		return nil, err
	}
	report.attribute(shards, owners, writes)
	return report, nil
}

// createShardedServers creates n servers, server i in shard i mod the
// number of shards, labelled with Flux's sharding key.
func (e *Env) createShardedServers(ctx context.Context, namespace string, n int, shards []string) error {
	return forEach(ctx, n, func(ctx context.Context, i int) error {
		server := &embedopsv1.EmbeddingServer{
			ObjectMeta: metav1.ObjectMeta{Name: serverName(i), Namespace: namespace,
				Labels: map[string]string{embedopsv1.ShardLabel: shards[i%len(shards)]}},
			Spec: embedopsv1.EmbeddingServerSpec{Model: embedopsv1.ModelSpec{Name: benchModel}},
		}
		if err := e.Client.Create(ctx, server); err != nil {
			return fmt.Errorf("creating server %s: %w", server.Name, err)
		}
		return nil
	})
}

// shardOwners maps the objects of a namespace to the shard they belong to.
type shardOwners struct {
	// servers maps a server to its shard.
	servers map[string]string
	// children maps "<resource>/<name>" of a child to its server.
	children map[string]string
	// bindings maps a binding to the shard its key names.
	bindings map[string]string
}

// shardsOf reads the servers, their children and the bindings of
// namespace, and what shard each belongs to.
func (e *Env) shardsOf(ctx context.Context, namespace string) (shardOwners, error) {
	owners := shardOwners{servers: map[string]string{}, children: map[string]string{}, bindings: map[string]string{}}
	var servers embedopsv1.EmbeddingServerList
	if err := e.Client.List(ctx, &servers, client.InNamespace(namespace)); err != nil {
		return owners, err
	}
	for _, server := range servers.Items {
		owners.servers[server.Name] = server.Labels[embedopsv1.ShardLabel]
	}
	var bindings embedopsv1.ModelCacheBindingList
	if err := e.Client.List(ctx, &bindings, client.InNamespace(namespace)); err != nil {
		return owners, err
	}
	for _, binding := range bindings.Items {
		owners.bindings[binding.Name] = binding.Labels[embedopsv1.ShardLabel]
	}
	lists := map[string]client.ObjectList{
		"statefulsets":           &appsv1.StatefulSetList{},
		"services":               &corev1.ServiceList{},
		"persistentvolumeclaims": &corev1.PersistentVolumeClaimList{},
	}
	for resource, list := range lists {
		if err := e.Client.List(ctx, list, client.InNamespace(namespace), client.HasLabels{embedopsv1.NameLabel}); err != nil {
			return owners, err
		}
		err := meta.EachListItem(list, func(obj runtime.Object) error {
			item, err := meta.Accessor(obj)
			if err == nil {
				owners.children[resource+"/"+item.GetName()] = item.GetLabels()[embedopsv1.NameLabel]
			}
			return err
		})
		if err != nil {
			return owners, err
		}
	}
	return owners, nil
}

// attribute counts, for each shard, its writes by the shard of what they
// wrote.
func (r *ShardReport) attribute(shards []string, owners shardOwners, writes []ObjectWrite) {
	rows := map[string]*ShardWriteRows{}
	for _, shard := range shards {
		rows[shard] = &ShardWriteRows{Shard: shard}
	}
	for _, shard := range owners.servers {
		if row := rows[shard]; row != nil {
			row.Servers++
		}
	}
	for _, shard := range owners.bindings {
		if row := rows[shard]; row != nil {
			row.Bindings++
		}
	}
	writers := map[string]map[string]bool{}
	for _, write := range writes {
		shard := shardOfAgent(shards, write.UserAgent)
		if shard == "" {
			continue // the benchmark's client, kube-controller-manager, ...
		}
		resource, _, _ := strings.Cut(write.Resource, "/")
		switch {
		case resource == "events":
		case resource == "modelcachebindings":
			rows[shard].BindingWrites++
			if owners.bindings[write.Name] != shard {
				r.WrongBindingWrites++
			}
		case resource == "embeddingservers" || owners.children[resource+"/"+write.Name] != "":
			server := write.Name
			if resource == "embeddingservers" {
				rows[shard].ServerWrites++
			} else {
				server = owners.children[resource+"/"+write.Name]
				rows[shard].ChildWrites++
			}
			if owners.servers[server] != shard {
				r.WrongServerWrites++
			}
			if writers[server] == nil {
				writers[server] = map[string]bool{}
			}
			writers[server][shard] = true
		default:
			r.UnattributedWrites++
		}
	}
	for _, shardsWriting := range writers {
		if len(shardsWriting) > 1 {
			r.ServersOfTwoShards++
		}
	}
	for _, shard := range shards {
		r.Shards = append(r.Shards, *rows[shard])
	}
}

// shardOfAgent is the shard whose controller's user agent starts agent;
// "" for any other client.
func shardOfAgent(shards []string, agent string) string {
	i := slices.IndexFunc(shards, func(shard string) bool { return strings.HasPrefix(agent, ShardAgent(shard)+"/") })
	if i < 0 {
		return ""
	}
	return shards[i]
}
