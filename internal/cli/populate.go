package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/embedops/embedops/internal/populate"
)

// maxTerminationMessage is the most Kubernetes keeps of a termination message.
const maxTerminationMessage = 4096

// populateOptions are the flags of `embedops populate`.
type populateOptions struct {
	model          string
	revision       string
	dir            string
	image          string
	allBackends    bool
	resolveOnly    bool
	verifyOnly     bool
	prune          bool
	verify         string
	output         string
	terminationLog string
}

// terminationMessage is what a failed run leaves in the termination log:
// the error, and a reason the controller reads (populate.FailureReason).
type terminationMessage struct {
	Error  string `json:"error"`
	Reason string `json:"reason,omitempty"`
}

func newPopulateCommand() *cobra.Command {
	opts := populateOptions{}
	cmd := &cobra.Command{
		Use:   "populate --model MODEL (--dir DIR [--verify-only] | --resolve-only)",
		Short: "Download a model from the HuggingFace hub into a TEI cache directory",
		Long: "populate downloads a model repository at a revision into DIR in the cache layout TEI reads\n" +
			"(HUGGINGFACE_HUB_CACHE), verifying every file against the hub's listing, and records what it\n" +
			"wrote in a manifest (DIR/models--ORG--NAME/.embedops/COMMIT.json). A snapshot the manifest marks\n" +
			"complete is not downloaded again: with --verify=sizes (the default) each file is checked by its\n" +
			"size, so a start reads no file and takes the same time whatever the model's size; --verify=full\n" +
			"hashes every file again and downloads again any that does not match. A missing or damaged\n" +
			"manifest, or a file of the wrong size, leads to the full check. An interrupted download resumes;\n" +
			"when the hub is unreachable a complete cache still succeeds.\n\n" +
			"The hub is $" + populate.EnvEndpoint + " (default " + populate.DefaultEndpoint + ") and its token $" + populate.EnvToken + ";\n" +
			"$" + populate.EnvDownloadTimeout + " and $" + populate.EnvETagTimeout + " (whole seconds) bound a download's waits and a\n" +
			"metadata request, as in huggingface_hub. The proxy is $HTTPS_PROXY, $HTTP_PROXY and $NO_PROXY (or\n" +
			"their lowercase forms), and the certificate authorities the system's, replaced by the bundle in\n" +
			"$SSL_CERT_FILE and the directories in $SSL_CERT_DIR when they are set.\n\n" +
			"With --verify-only it downloads and writes nothing and asks no hub: it checks that DIR, a cache the\n" +
			"user filled, holds the model as TEI finds it (refs/REVISION holding a commit, snapshots/COMMIT with\n" +
			"the files TEI reads) and fails naming what is missing.\n\n" +
			"It deletes nothing unless given --prune. With --prune, before it downloads a new commit it prunes the\n" +
			"snapshots an earlier run completed but the one the last run left (.embedops/latest, the revision a pod\n" +
			"served; without that record, the one fetched last): their folders, the refs naming them and the blobs\n" +
			"only they use, as huggingface_hub's delete_revisions deletes a revision. It keeps every blob a kept\n" +
			"snapshot's manifest names, never prunes snapshots other programs wrote, prunes nothing when the hub lists\n" +
			"files without their blob ids, and holds the model folder's lock alone while it runs. The controller\n" +
			"passes --prune where one pod or Job writes a claim (a PerReplica claim's init container, a Shared claim's\n" +
			"populate Job); never give it on a directory that other servers read at other revisions.\n\n" +
			"It prints the resolved commit, the content digest, and the number of files and bytes, and writes\n" +
			"the same JSON to --termination-log (or {\"error\": ...} on failure). Progress goes to standard error.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPopulate(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), os.Getenv, opts)
		},
	}
	cmd.Flags().StringVar(&opts.model, "model", "", "hub model id, org/name")
	cmd.Flags().StringVar(&opts.revision, "revision", populate.DefaultRevision, "branch, tag or commit id")
	cmd.Flags().StringVar(&opts.dir, "dir", "", "cache directory (HUGGINGFACE_HUB_CACHE)")
	cmd.Flags().StringVar(&opts.image, "image", "", "TEI image that reads the cache: download only the files it reads (empty: every file)")
	cmd.Flags().BoolVar(&opts.allBackends, "all-backends", false,
		"download what any TEI backend reads (ONNX Runtime, candle, python), whatever --image says: for a cache servers running different images share")
	cmd.Flags().BoolVar(&opts.resolveOnly, "resolve-only", false,
		"only ask the hub which commit --revision names and print that: no --dir, nothing downloaded (the controller pins a new server's replicas to one commit with it)")
	cmd.Flags().BoolVar(&opts.verifyOnly, "verify-only", false,
		"only check that --dir already holds the model at --revision, offline and read-only (the controller checks a spec.cache.existingClaim with it)")
	cmd.Flags().BoolVar(&opts.prune, "prune", false,
		"before downloading a new commit, delete the snapshots an earlier run completed in --dir, but the one the last run left, and the blobs and refs only they use (the controller passes it; default: delete nothing)")
	cmd.Flags().StringVar(&opts.verify, "verify", string(populate.VerifySizes),
		"how to check a snapshot the cache holds: sizes (no file is read) or full (every file is hashed)")
	cmd.Flags().StringVarP(&opts.output, "output", "o", outputJSON, "output format: json or yaml")
	cmd.Flags().StringVar(&opts.terminationLog, "termination-log", "", "also write the result as JSON to this file (a pod's terminationMessagePath)")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}

func runPopulate(ctx context.Context, stdout, stderr io.Writer, getenv func(string) string, opts populateOptions) error {
	if opts.output != outputYAML && opts.output != outputJSON {
		return usageErrorf("unknown output format %q: use json or yaml", opts.output)
	}
	result, err := populateWith(ctx, stderr, getenv, opts)
	if err != nil {
		if opts.terminationLog != "" {
			if logErr := writeTerminationLog(opts.terminationLog, failureMessage(err)); logErr != nil {
				fmt.Fprintln(stderr, logErr)
			}
		}
		return err
	}
	if opts.terminationLog != "" {
		data, err := resultMessage(*result)
		if err != nil {
			return err
		}
		if err := writeTerminationLog(opts.terminationLog, data); err != nil {
			return err
		}
	}
	return printStructured(stdout, opts.output, result)
}

// populateWith runs populate with the flags and the environment's options.
func populateWith(ctx context.Context, stderr io.Writer, getenv func(string) string, opts populateOptions) (*populate.Result, error) {
	verify, err := populate.ParseVerify(opts.verify)
	if err != nil {
		return nil, usageErrorf("--verify: %w", err)
	}
	if (opts.dir == "") != opts.resolveOnly {
		return nil, usageErrorf("give either --dir, the cache to fill, or --resolve-only")
	}
	if opts.verifyOnly && opts.dir == "" {
		return nil, usageErrorf("--verify-only checks the cache in --dir")
	}
	options, err := populate.EnvOptions(getenv)
	if err != nil {
		return nil, err
	}
	options.Model, options.Revision, options.Dir = opts.model, opts.revision, opts.dir
	options.Image, options.AllBackends, options.Verify = opts.image, opts.allBackends, verify
	options.Prune = opts.prune
	if opts.prune {
		// The runs that fill a claim (the builder's, which prune) record
		// their pod; a replica's claim cloned from another's then shows
		// as a copy (populate.Options.Filler). A pod's hostname is its
		// name (kubernetes pkg/kubelet/kubelet_pods.go, GeneratePodHostNameAndDomain).
		options.Filler, _ = os.Hostname()
	}
	options.Log = slog.New(slog.NewTextHandler(stderr, nil))
	if opts.resolveOnly {
		return populate.Resolve(ctx, options)
	}
	if opts.verifyOnly {
		return populate.VerifyOffline(ctx, options)
	}
	return populate.Run(ctx, options)
}

// resultMessage encodes the result for the termination log, without the
// file names when they do not fit: the count and bytes always do.
func resultMessage(result populate.Result) ([]byte, error) {
	data, err := json.Marshal(result)
	if err == nil && len(data) > maxTerminationMessage {
		result.Names = nil
		data, err = json.Marshal(result)
	}
	if err != nil {
		return nil, fmt.Errorf("encoding the result: %w", err)
	}
	return data, nil
}

// failureMessage encodes err for the termination log, shortened to fit.
func failureMessage(err error) []byte {
	message := []rune(err.Error())
	for {
		data, _ := json.Marshal(terminationMessage{Error: string(message), Reason: populate.FailureReason(err)})
		if len(data) <= maxTerminationMessage {
			return data
		}
		message = message[:len(message)*3/4]
	}
}

func writeTerminationLog(path string, data []byte) error {
	if len(data) > maxTerminationMessage {
		return fmt.Errorf("the termination message has %d bytes, more than %d", len(data), maxTerminationMessage)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing the termination log: %w", err)
	}
	return nil
}
