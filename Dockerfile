# Production image for compose.yaml: web, worker and beat share it.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 CAIRN_VAR_DIR=/data
WORKDIR /app
COPY pyproject.toml README.md ./
COPY cairn cairn
COPY memory memory
COPY agents agents
COPY reviews reviews
RUN pip install --no-cache-dir .
COPY . .
RUN mkdir -p /data && SECRET_KEY=build DATABASE_URL=postgres://x/x REDIS_URL=redis://x:6379/0 \
    python manage.py collectstatic --noinput --verbosity 0
EXPOSE 8000
CMD ["gunicorn", "cairn.wsgi", "-c", "python:cairn.gunicorn_conf", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "4", "--access-logfile", "-", "--logger-class", "cairn.accesslog.RedactingLogger"]
