// Command manager is the one binary of Engram:
//
//	manager [flags]          the operator (controllers for MemoryRuntime, MemoryPolicy, RetentionJob)
//	manager serve [flags]    the memory service of one tenant (HTTP + MCP)
//	manager job [flags]      one maintenance run of one tenant (decay, expire, purge, compact, summarize, sessions)
//	manager token ...        mint a signed token, or generate a static one (docs/security.md)
//
// The operator rolls out its own image with `serve` and runs `job` from
// CronJobs, so service, jobs and schema version always match.
package main

import (
	"fmt"
	"os"
)

func main() {
	args := os.Args[1:]
	run := runController
	if len(args) > 0 {
		switch args[0] {
		case "serve":
			run, args = runServe, args[1:]
		case "job":
			run, args = runJob, args[1:]
		case "token":
			run, args = runToken, args[1:]
		case "controller":
			args = args[1:]
		case "help", "-h", "--help":
			if len(args) == 1 {
				fmt.Fprint(os.Stdout, usage)
				return
			}
		}
	}
	os.Exit(run(args))
}

const usage = `Usage:
  manager [controller] [flags]   run the operator (default)
  manager serve [flags]          run the memory service of one tenant
  manager job [flags]            run maintenance operations of one tenant once
  manager token mint|new [flags] mint a signed agent token, or generate a line for the tokens Secret

Run "manager <command> -h" for the flags of a command.
`
