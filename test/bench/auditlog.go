package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
)

// AuditPolicy logs every request's metadata once, when its response is
// complete: enough to count requests by user agent, verb and resource. A
// server's status writes are logged with their request body too, which
// says what the controller observed (statusObservation).
const AuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
- level: Request
  verbs: [patch, update]
  resources:
  - group: embedops.dev
    resources: [embeddingservers/status]
- level: Metadata
`

// Counts are API requests of one client, by "<resource>[/<subresource>]".
type Counts struct {
	// Requests counts every request, reads and dry runs included.
	Requests map[string]int
	// Writes counts create, update, patch and delete requests that were not
	// dry runs and succeeded: the requests that stored something (a patch
	// that changes nothing is counted too; the audit log cannot tell it).
	Writes map[string]int
	// Causes counts every request by what it is for (causeOf): verb and
	// resource, dry runs and failures apart, and a server's status writes
	// by the observation they record.
	Causes map[string]CauseCount
}

// CauseCount is the requests of one cause and how many of them stored
// something.
type CauseCount struct {
	Requests int `json:"requests"`
	Writes   int `json:"writes"`
}

// Total adds up a count map.
func Total(counts map[string]int) int {
	total := 0
	for _, n := range counts {
		total += n
	}
	return total
}

// auditEvent is the part of an audit.k8s.io/v1 Event that is counted.
type auditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	UserAgent  string `json:"userAgent"`
	RequestURI string `json:"requestURI"`
	// RequestObject is logged for a server's status writes only.
	RequestObject json.RawMessage `json:"requestObject"`
	ObjectRef     *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// succeeded reports whether the request's response was a success.
func (e auditEvent) succeeded() bool {
	return e.ResponseStatus != nil && e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300
}

// writeVerbs are the audit verbs that change stored state.
var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// ObjectWrite is one write that stored something, as the audit log saw it.
type ObjectWrite struct {
	// UserAgent is the writer's user agent.
	UserAgent string
	// Verb is the audit verb (create, update, patch, delete).
	Verb string
	// Resource is "<resource>[/<subresource>]".
	Resource string
	// Name is the object's name; the API server records it for a create
	// too (from the object, at the Metadata level).
	Name string
}

// ObjectWrites reads an audit log and returns the writes to objects in
// namespace that were not dry runs and succeeded, in the log's order.
func ObjectWrites(path, namespace string) ([]ObjectWrite, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	defer func() { _ = file.Close() }()
	var writes []ObjectWrite
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for scanner.Scan() {
		var event auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &event); err != nil {
			return nil, fmt.Errorf("parsing the audit log: %w", err)
		}
		if event.Stage != "ResponseComplete" || event.ObjectRef == nil || event.ObjectRef.Namespace != namespace ||
			!writeVerbs[event.Verb] || isDryRun(event.RequestURI) || !event.succeeded() {
			continue
		}
		writes = append(writes, ObjectWrite{UserAgent: event.UserAgent, Verb: event.Verb, Resource: resourceOf(event), Name: event.ObjectRef.Name})
	}
	return writes, scanner.Err()
}

// CountRequests reads an audit log and counts the completed requests whose
// user agent starts with userAgent and, when namespace is set, that address
// objects in that namespace (so another run's teardown is not counted).
func CountRequests(path, userAgent, namespace string) (Counts, error) {
	file, err := os.Open(path)
	if err != nil {
		return Counts{}, fmt.Errorf("opening the audit log: %w", err)
	}
	defer func() { _ = file.Close() }()
	counts := Counts{Requests: map[string]int{}, Writes: map[string]int{}, Causes: map[string]CauseCount{}}
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for scanner.Scan() {
		var event auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &event); err != nil {
			return Counts{}, fmt.Errorf("parsing the audit log: %w", err)
		}
		if event.Stage != "ResponseComplete" || !strings.HasPrefix(event.UserAgent, userAgent) || !inNamespace(event, namespace) {
			continue
		}
		resource, cause := resourceOf(event), causeOf(event)
		counts.Requests[resource]++
		tally := counts.Causes[cause]
		tally.Requests++
		if writeVerbs[event.Verb] && !isDryRun(event.RequestURI) && event.succeeded() {
			counts.Writes[resource]++
			tally.Writes++
		}
		counts.Causes[cause] = tally
	}
	return counts, scanner.Err()
}

// inNamespace reports whether event addresses namespace; "" matches all.
func inNamespace(event auditEvent, namespace string) bool {
	return namespace == "" || (event.ObjectRef != nil && event.ObjectRef.Namespace == namespace)
}

// resourceOf names an event's resource and subresource.
func resourceOf(event auditEvent) string {
	switch {
	case event.ObjectRef == nil:
		return "(non-resource)"
	case event.ObjectRef.Subresource != "":
		return event.ObjectRef.Resource + "/" + event.ObjectRef.Subresource
	default:
		return event.ObjectRef.Resource
	}
}

// causeOf names what a request is for: "<verb> <resource>", with "dry
// run" or the failure's status code after it, and for a server's status
// write the observation it records.
func causeOf(event auditEvent) string {
	cause := event.Verb + " " + resourceOf(event)
	switch {
	case isDryRun(event.RequestURI):
		cause += " (dry run)"
	case event.ResponseStatus != nil && !event.succeeded():
		cause += fmt.Sprintf(" (%d)", event.ResponseStatus.Code)
	}
	if resourceOf(event) == statusWrites && len(event.RequestObject) > 0 {
		cause += ": " + statusObservation(event.RequestObject)
	}
	return cause
}

// statusObservation summarises a status write by what it records: the
// Ready condition it sets (status and reason), or the first condition
// when Ready is not among them, else the fields it writes, such as a
// reconcile request's acknowledgement (lastHandledReconcileAt) alone.
func statusObservation(body json.RawMessage) string {
	var written struct {
		Status map[string]json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(body, &written); err != nil || len(written.Status) == 0 {
		return "no status"
	}
	var conditions []struct {
		Type, Status, Reason string
	}
	if err := json.Unmarshal(written.Status["conditions"], &conditions); err == nil && len(conditions) > 0 {
		shown := conditions[0]
		for _, condition := range conditions {
			if condition.Type == "Ready" {
				shown = condition
			}
		}
		return fmt.Sprintf("%s=%s %s", shown.Type, shown.Status, shown.Reason)
	}
	fields := slices.Sorted(maps.Keys(written.Status))
	return "fields " + strings.Join(fields, ",")
}

// isDryRun reports whether a request URI asks for a dry run.
func isDryRun(requestURI string) bool {
	parsed, err := url.Parse(requestURI)
	return err == nil && parsed.Query().Get("dryRun") != ""
}

// Since returns the counts in after that are not in before.
func Since(before, after Counts) Counts {
	causes := map[string]CauseCount{}
	for cause, n := range after.Causes {
		if d := (CauseCount{Requests: n.Requests - before.Causes[cause].Requests, Writes: n.Writes - before.Causes[cause].Writes}); d != (CauseCount{}) {
			causes[cause] = d
		}
	}
	return Counts{Requests: subtract(after.Requests, before.Requests), Writes: subtract(after.Writes, before.Writes), Causes: causes}
}

func subtract(after, before map[string]int) map[string]int {
	delta := map[string]int{}
	for key, n := range after {
		if d := n - before[key]; d != 0 {
			delta[key] = d
		}
	}
	return delta
}
