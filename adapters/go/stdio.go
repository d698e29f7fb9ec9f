package agent

import (
	"os"
	"sync"
)

var (
	stdioOnce sync.Once
	frameIn   *os.File
	frameOut  *os.File
)

// takeOverStdio moves the frame stream off the standard fds once (see
// redirectStdio) and returns the files frames are read from and written to.
func takeOverStdio() (in, out *os.File) {
	stdioOnce.Do(func() { frameIn, frameOut = redirectStdio() })
	return frameIn, frameOut
}
