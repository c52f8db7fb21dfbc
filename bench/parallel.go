package main

import "sync"

// createClients is how many clients create the bench's objects at once, as
// a GitOps tool applying a directory would.
const createClients = 8

// inParallel calls create for 0..n-1 from createClients goroutines. Every
// index is tried even after a failure; the first error is returned.
func inParallel(n int, create func(i int) error) error {
	ch := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range createClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ch {
				if err := create(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		ch <- i
	}
	close(ch)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}
