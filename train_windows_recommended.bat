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
REM ---------------------------------------------------------------------------
setlocal

REM Switch: set to 1 to make CUDA errors point at the failing line (much slower training).
if not defined DEBUG_CUDA_ERRORS set DEBUG_CUDA_ERRORS=0

set "REPO=%~dp0"
if "%REPO:~-1%"=="\" set "REPO=%REPO:~0,-1%"

REM Pretrained weights are downloaded (once) into this folder.
if not defined TORCH_HOME set "TORCH_HOME=%REPO%\.torch_cache"
REM Two OpenMP runtimes (numpy/MKL and torch) otherwise abort the process.
set KMP_DUPLICATE_LIB_OK=TRUE
REM No worker processes below, so the training process may use every core.
if not defined OMP_NUM_THREADS set OMP_NUM_THREADS=%NUMBER_OF_PROCESSORS%
REM Import fastreid from this checkout, installed or not.
set "PYTHONPATH=%REPO%;%PYTHONPATH%"

set CUDA_FLAG=
if "%DEBUG_CUDA_ERRORS%"=="1" (
    set CUDA_LAUNCH_BLOCKING=1
    set CUDA_FLAG=--cuda-launch-blocking
)

set "PY=python"
if exist "%REPO%\.venv\Scripts\python.exe" set "PY=%REPO%\.venv\Scripts\python.exe"

set "CONFIG=%REPO%\custom_configs\plateau_solutions\solution_5_smaller_batch_higher_lr.yml"

echo fastreid: TORCH_HOME=%TORCH_HOME%  OMP_NUM_THREADS=%OMP_NUM_THREADS%  CUDA_LAUNCH_BLOCKING=%CUDA_LAUNCH_BLOCKING%
"%PY%" "%REPO%\tools\train_net.py" --config-file "%CONFIG%" %CUDA_FLAG% %* DATALOADER.NUM_WORKERS 0
set EXITCODE=%ERRORLEVEL%
endlocal & exit /b %EXITCODE%
