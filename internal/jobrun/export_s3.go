package jobrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3Destination is a bucket of an S3-compatible store.
type S3Destination struct {
	Endpoint, Bucket, Prefix, Region string
	UsePathStyle                     bool
	// From the environment (a Secret), never from flags: never logged.
	AccessKeyID, SecretAccessKey string
}

// S3 part sizes: S3 refuses parts under 5 MiB (but the last) and more
// than 10,000 parts, so 16 MiB parts carry exports up to 160 GB.
const (
	MinPartSize     int64 = 5 << 20
	DefaultPartSize int64 = 16 << 20
	MaxPartSize     int64 = 512 << 20
)

// s3RequestTimeout bounds one request (one part): a store that stops
// answering fails the run instead of holding it to activeDeadlineSeconds.
const s3RequestTimeout = 5 * time.Minute

// newS3Client is a client for d: static credentials, checksums only where
// the API requires them (S3-compatible stores differ in the newer ones).
func newS3Client(d *S3Destination) *s3.Client {
	creds := aws.Credentials{AccessKeyID: d.AccessKeyID, SecretAccessKey: d.SecretAccessKey, Source: "engram"}
	return s3.New(s3.Options{
		BaseEndpoint:               aws.String(d.Endpoint),
		Region:                     d.Region,
		UsePathStyle:               d.UsePathStyle,
		Credentials:                aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		HTTPClient:                 &http.Client{Timeout: s3RequestTimeout},
		RetryMaxAttempts:           3,
	})
}

// s3Sink uploads an export as parts of one multipart upload and completes
// it at the end; until then no object exists under the key, and a failed
// run aborts the upload. An export smaller than one part is one PutObject.
type s3Sink struct {
	ctx      context.Context
	c        *s3.Client
	bucket   string
	key      string
	partSize int64
	buf      bytes.Buffer
	uploadID string
	parts    []types.CompletedPart
}

func openS3(ctx context.Context, d *S3Destination, name string, partSize int64) *s3Sink {
	if partSize <= 0 {
		partSize = DefaultPartSize
	}
	s := &s3Sink{ctx: ctx, c: newS3Client(d), bucket: d.Bucket, key: d.Prefix + name, partSize: partSize}
	s.buf.Grow(int(partSize))
	return s
}

func (s *s3Sink) location() string { return "s3://" + s.bucket + "/" + s.key }

// Write buffers p and uploads each full part.
func (s *s3Sink) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		room := int(s.partSize) - s.buf.Len()
		take := min(room, len(p))
		s.buf.Write(p[:take])
		p = p[take:]
		if int64(s.buf.Len()) == s.partSize {
			if err := s.uploadPart(s.ctx); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// uploadPart sends the buffer as the next part, starting the upload first.
func (s *s3Sink) uploadPart(ctx context.Context) error {
	if s.uploadID == "" {
		out, err := s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
			Bucket: &s.bucket, Key: &s.key, ContentType: aws.String("application/x-ndjson")})
		if err != nil {
			return fmt.Errorf("starting the upload of %s: %w", s.location(), err)
		}
		s.uploadID = aws.ToString(out.UploadId)
	}
	num := int32(len(s.parts) + 1)
	out, err := s.c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &s.bucket, Key: &s.key, UploadId: &s.uploadID,
		PartNumber: &num, Body: bytes.NewReader(s.buf.Bytes()), ContentLength: aws.Int64(int64(s.buf.Len()))})
	if err != nil {
		return fmt.Errorf("uploading part %d of %s: %w", num, s.location(), err)
	}
	s.parts = append(s.parts, types.CompletedPart{ETag: out.ETag, PartNumber: &num})
	s.buf.Reset()
	return nil
}

// Commit uploads the rest and completes the upload: only now does the
// object exist.
func (s *s3Sink) Commit(ctx context.Context) (string, error) {
	if s.uploadID == "" {
		_, err := s.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: &s.key,
			Body: bytes.NewReader(s.buf.Bytes()), ContentLength: aws.Int64(int64(s.buf.Len())),
			ContentType: aws.String("application/x-ndjson")})
		if err != nil {
			return "", fmt.Errorf("uploading %s: %w", s.location(), err)
		}
		return s.location(), nil
	}
	if s.buf.Len() > 0 {
		if err := s.uploadPart(ctx); err != nil {
			return "", err
		}
	}
	_, err := s.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: &s.key,
		UploadId: &s.uploadID, MultipartUpload: &types.CompletedMultipartUpload{Parts: s.parts}})
	if err != nil {
		return "", fmt.Errorf("completing the upload of %s: %w", s.location(), err)
	}
	return s.location(), nil
}

// abortTimeout bounds the abort of a failed upload (its context is not
// the run's, which may have ended).
const abortTimeout = 30 * time.Second

// Abort drops the parts uploaded so far. If the store cannot be reached,
// they stay until the bucket's lifecycle rule for incomplete multipart
// uploads removes them, but no object exists under the key.
func (s *s3Sink) Abort(ctx context.Context) error {
	s.buf.Reset()
	if s.uploadID == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, abortTimeout)
	defer cancel()
	_, err := s.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &s.key, UploadId: &s.uploadID})
	var nf *types.NoSuchUpload
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("aborting the upload of %s: %w", s.location(), err)
	}
	return nil
}
