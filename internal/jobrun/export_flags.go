package jobrun

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
)

// Version is the Engram version an export's header names (set at link
// time like server.Version).
var Version = "dev"

// exportFlags registers the --export-* flags. The S3 destination is set
// once --export-s3-bucket is given; its access key comes from the
// environment only (a Secret), so it is never on a command line.
func exportFlags(fs *flag.FlagSet, d *ExportDestination) {
	d.PartSize = DefaultPartSize
	s3d := &S3Destination{Region: "us-east-1"}
	fs.BoolVar(&d.Vectors, "export-vectors", false, "export: include each memory's embedding")
	fs.StringVar(&d.Dir, "export-dir", "", "export: write the export as a file into this directory (a mounted PVC)")
	fs.StringVar(&d.Claim, "export-pvc-claim", "", "export: the PVC mounted at --export-dir, to name the file in the summary")
	fs.StringVar(&d.SubPath, "export-pvc-subpath", "", "export: the directory of --export-dir within the PVC, to name the file in the summary")
	fs.StringVar(&s3d.Endpoint, "export-s3-endpoint", "", "export: URL of an S3-compatible API")
	fs.Func("export-s3-bucket", "export: upload the export to this bucket (access key in "+naming.EnvExportS3AccessKeyID+" and "+naming.EnvExportS3SecretAccessKey+")", func(v string) error {
		s3d.Bucket = v
		d.S3 = s3d
		return nil
	})
	fs.StringVar(&s3d.Prefix, "export-s3-prefix", "", "export: prefix of the object's key")
	fs.StringVar(&s3d.Region, "export-s3-region", s3d.Region, "export: region the requests are signed for")
	fs.BoolVar(&s3d.UsePathStyle, "export-s3-path-style", false, "export: address the bucket in the path, not the host name")
	fs.Func("export-part-size", "export: bytes of one part of an S3 multipart upload, 5 MiB to 512 MiB (default 16 MiB)", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < MinPartSize || n > MaxPartSize {
			return fmt.Errorf("must be a number of bytes within %d..%d", MinPartSize, MaxPartSize)
		}
		d.PartSize = n
		return nil
	})
}

// validate checks the destination of a run that exports.
func (d *ExportDestination) validate() error {
	if (d.Dir == "") == (d.S3 == nil) {
		return errors.New("export needs exactly one destination: --export-dir or --export-s3-bucket")
	}
	if d.S3 == nil {
		return nil
	}
	u, err := url.Parse(d.S3.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--export-s3-endpoint %q: want an http:// or https:// URL", d.S3.Endpoint)
	}
	if d.S3.Bucket == "" {
		return errors.New("--export-s3-bucket is empty")
	}
	if d.S3.AccessKeyID == "" || d.S3.SecretAccessKey == "" {
		return fmt.Errorf("the S3 access key is missing: set %s and %s (the RetentionJob's spec.export.s3.credentialsSecretRef)",
			naming.EnvExportS3AccessKeyID, naming.EnvExportS3SecretAccessKey)
	}
	return nil
}

// withExport returns how the run's Runner is built: with the export
// destination when ops has export (checked now, before any operation
// runs), else the store as it is.
func withExport(ops []string, o *Options, cfg *memory.ServiceConfig) (func(Runner) Runner, error) {
	if !slices.Contains(ops, memory.OpExport) {
		return func(r Runner) Runner { return r }, nil
	}
	if err := o.Export.validate(); err != nil {
		return nil, err
	}
	info := memory.ExportInfo{
		EngramVersion: Version,
		Embedder:      memory.ExportEmbedder{Provider: cfg.Embedding.Provider, Model: cfg.Embedding.Model, Dimensions: cfg.Embedding.Dimensions},
		Policy:        cfg.PolicyName,
	}
	return func(r Runner) Runner {
		st, _ := r.(exportStore)
		return &exportRunner{Runner: r, store: st, schema: cfg.Schema, info: info, dest: &o.Export, now: time.Now}
	}, nil
}
