package consensus

import (
	"go.uber.org/zap"
)

// raftLogger adapts zap to raft.Logger. raft logs elections and membership
// at Info, which is worth keeping; its Debug output stays at Debug.
type raftLogger struct{ s *zap.SugaredLogger }

func newRaftLogger(l *zap.Logger) raftLogger {
	// Skip the adapter's own frame so call sites point into raft.
	return raftLogger{l.WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

func (l raftLogger) Debug(v ...any)                   { l.s.Debug(v...) }
func (l raftLogger) Debugf(format string, v ...any)   { l.s.Debugf(format, v...) }
func (l raftLogger) Error(v ...any)                   { l.s.Error(v...) }
func (l raftLogger) Errorf(format string, v ...any)   { l.s.Errorf(format, v...) }
func (l raftLogger) Info(v ...any)                    { l.s.Info(v...) }
func (l raftLogger) Infof(format string, v ...any)    { l.s.Infof(format, v...) }
func (l raftLogger) Warning(v ...any)                 { l.s.Warn(v...) }
func (l raftLogger) Warningf(format string, v ...any) { l.s.Warnf(format, v...) }

// Fatal and Panic are raft's reactions to broken invariants (a corrupted
// log, a conf change that cannot apply); raft does not expect them to return.
func (l raftLogger) Fatal(v ...any)                 { l.s.Fatal(v...) }
func (l raftLogger) Fatalf(format string, v ...any) { l.s.Fatalf(format, v...) }
func (l raftLogger) Panic(v ...any)                 { l.s.Panic(v...) }
func (l raftLogger) Panicf(format string, v ...any) { l.s.Panicf(format, v...) }
