// Module s3server builds the S3-compatible server the export tests start
// (hack/s3server.sh). It is never imported by the product.
module github.com/engram-dev/engram/tools/s3server

go 1.26.0

require (
	github.com/johannesboyne/gofakes3 v1.2.0
	go.etcd.io/bbolt v1.3.5
)

require (
	github.com/ryszard/goskiplist v0.0.0-20150312221310-2dfbae5fcf46 // indirect
	go.shabbyrobe.org/gocovmerge v0.0.0-20230507111327-fa4f82cfbf4d // indirect
	golang.org/x/sys v0.7.0 // indirect
	golang.org/x/tools v0.8.0 // indirect
	gopkg.in/check.v1 v1.0.0-20201130134442-10cb98267c6c // indirect
	gopkg.in/mgo.v2 v2.0.0-20180705113604-9856a29383ce // indirect
)
