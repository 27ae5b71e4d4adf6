@echo off
REM ---------------------------------------------------------------------------
REM fastreid training on Windows, with settings that avoid the usual failures:
REM   error 1455 / "paging file too small", pickling errors in DataLoader workers,
REM   "An attempt has been made to start a new process before the bootstrapping
REM   phase" and the OpenMP "libiomp5md.dll already initialized" abort.
REM
REM Usage (from anywhere):
REM   train_windows_recommended.bat
REM   train_windows_recommended.bat --resume
REM   train_windows_recommended.bat --config-file configs\Market1501\bagtricks_R50.yml SOLVER.IMS_PER_BATCH 32
REM Every argument is passed on to tools\train_net.py (a later --config-file wins).
REM
REM The settings themselves (TORCH_HOME, KMP_DUPLICATE_LIB_OK, OMP_NUM_THREADS, PYTHONPATH,
REM CUDA_LAUNCH_BLOCKING, the plateau-solution config, DATALOADER.NUM_WORKERS 0) live in one
REM place, fastreid.utils.env.apply_windows_safe_environment, applied by train_windows_patched.py.
REM ---------------------------------------------------------------------------
setlocal

REM Switch: set to 1 to make CUDA errors point at the failing line (much slower training).
if not defined DEBUG_CUDA_ERRORS set DEBUG_CUDA_ERRORS=0

set "REPO=%~dp0"
if "%REPO:~-1%"=="\" set "REPO=%REPO:~0,-1%"

REM The command a stop prints to resume with is this file, with its arguments (fastreid.utils.resume_hint).
set "FASTREID_LAUNCHER=%~f0"

set "PY=python"
if exist "%REPO%\.venv\Scripts\python.exe" set "PY=%REPO%\.venv\Scripts\python.exe"

"%PY%" "%REPO%\train_windows_patched.py" %*
set EXITCODE=%ERRORLEVEL%
endlocal & exit /b %EXITCODE%
