package storage

import (
	"context"
	"testing"
	"time"
)

func TestTrimFreedMemoryStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); TrimFreedMemory(ctx) }()
	trimMalloc() // harmless at any time, on any platform
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("TrimFreedMemory did not return after its context ended")
	}
}
